"""The `gslbd` command as a user runs it: check, explain, version, serve's start and stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest
from dns_config import CONFIG, ZONE
from gslbd_harness import gslbd_command, start_gslbd

from gslbd import __version__

EXAMPLE = Path(__file__).parents[2] / "src" / "gslbd" / "examples" / "example.yaml"

BROKEN = """\
version: 1
dns:
  listen: ["127.0.0.1:99999"]
zones:
  - origin: gslb.example.com.
    nameservers:
      - {name: ns1.gslb.example.com., address: 192.0.2.53}
services:
  - name: app.gslb.example.com.
    policy: fastest
    check: none
    endpoints:
      - {address: 192.0.2.300}
"""


def gslbd(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(gslbd_command(*args), capture_output=True, text=True, timeout=timeout, check=False)


def test_version_prints_the_package_version() -> None:
    out = gslbd("version")
    assert (out.returncode, out.stdout) == (0, f"gslbd {__version__}\n")


def test_check_accepts_the_bundled_example() -> None:
    out = gslbd("check", "--config", str(EXAMPLE))
    assert out.returncode == 0
    assert out.stdout == f"{EXAMPLE}: ok (1 zone, 4 services)\n"


def test_check_prints_every_problem_with_file_line_and_path_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    out = gslbd("check", "-c", str(path))
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[:3] == [
        f"error: {path}:3: dns.listen[0]: '127.0.0.1:99999': port must be between 0 and 65535",
        f"error: {path}:10: services[0].policy: unknown policy 'fastest'; valid: "
        "round_robin | weighted | failover | geo | random | hash",
        f"error: {path}:13: services[0].endpoints[0].address: '192.0.2.300' is neither an IP address nor a "
        "hostname "
        "ending in a dot",
    ]
    assert lines[-1].startswith(f"{path}: 3 errors")


def test_check_of_a_missing_file_is_an_error() -> None:
    out = gslbd("check", "--config", "/nonexistent/gslbd.yaml")
    assert out.returncode == 1
    assert (
        out.stdout.splitlines()[0]
        == "error: /nonexistent/gslbd.yaml: cannot read the configuration: No such file or directory"
    )


def test_check_needs_a_config_argument() -> None:
    out = gslbd("check")
    assert out.returncode == 2
    assert "--config" in out.stderr


def test_serve_with_a_broken_config_prints_every_problem_to_stderr_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    out = gslbd("serve", "--config", str(path))
    assert out.returncode == 1
    # The very lines `gslbd check` prints (marks and count), on stderr.
    checked = gslbd("check", "--config", str(path))
    assert out.stderr.splitlines() == checked.stdout.splitlines()
    assert out.stderr.splitlines()[0].startswith(f"error: {path}:3: dns.listen[0]: ")
    assert out.stderr.splitlines()[-1] == f"{path}: 3 errors, 1 warning"
    assert out.stdout == ""


def test_serve_of_an_unusable_config_prints_the_check_lines_too(tmp_path: Path) -> None:
    path = tmp_path / "nozones.yaml"
    path.write_text('version: 1\ndns: {listen: ["127.0.0.1:0"]}\nzones: []\n')
    out = gslbd("serve", "--config", str(path))
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        f"error: {path}: zones: no zone is configured, so every query would be answered REFUSED",
        f"{path}: 1 error",
    ]
    assert out.stderr.splitlines() == gslbd("check", "--config", str(path)).stdout.splitlines()


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--config", str(EXAMPLE)),
        ("explain", "geo.gslb.example.com", "--client", "10.2.3.4"),
        ("version",),
    ],
    ids=["check", "explain", "version"],
)
def test_a_closed_output_pipe_ends_the_command_quietly(args: tuple[str, ...]) -> None:
    """`gslbd status | head`: the reader is gone before the command writes (its end is closed here
    first, so every write fails with EPIPE)."""
    read, write = os.pipe()
    os.close(read)
    try:
        out = subprocess.run(
            gslbd_command(*args), stdout=write, stderr=subprocess.PIPE, text=True, timeout=60, check=False
        )
    finally:
        os.close(write)
    assert (out.returncode, out.stderr) == (141, "")


def test_serve_that_cannot_bind_says_so_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "unbindable.yaml"
    # 192.0.2.1 is not an address of this machine.
    path.write_text(CONFIG.replace("@LISTEN@", '["192.0.2.1:5399"]'))
    out = gslbd("serve", "--config", str(path))
    assert out.returncode == 1
    assert "gslbd: cannot listen on 192.0.2.1:5399:" in out.stderr


def test_explain_says_where_the_client_is_and_what_it_gets() -> None:
    out = gslbd("explain", "geo.gslb.example.com", "--client", "10.2.3.4", "--config", str(EXAMPLE))
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[:2] == [f"config: {EXAMPLE}", "question: geo.gslb.example.com. A"]
    assert "location: topology 10.2.0.0/16 -> site us, region us-east1, zone us-east1-b" in out.stdout
    assert lines[-1] == "  answer: geo.gslb.example.com. 30 IN A 198.51.100.30"


def test_explain_with_ecs_locates_by_the_subnet_and_defaults_to_the_bundled_example() -> None:
    out = gslbd("explain", "GEO.gslb.example.com.", "--client", "192.0.2.99", "--ecs", "10.1.0.0/16")
    assert out.returncode == 0
    # It says which config it read: the bundled example, not a running server's nor one in the cwd.
    assert out.stdout.splitlines()[0] == (
        f"config: {EXAMPLE} (the bundled example; --config FILE explains another; a running server is "
        "not asked)"
    )
    assert "  answer: geo.gslb.example.com. 30 IN A 192.0.2.30" in out.stdout.splitlines()
    assert "ECS scope: /16" in out.stdout


def test_explain_rejects_a_client_that_is_not_an_address() -> None:
    out = gslbd("explain", "app.gslb.example.com", "--client", "nope")
    assert out.returncode == 2
    assert out.stderr == "gslbd explain: --client 'nope' is not an IP address\n"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stops_cleanly_on_sigterm_and_sigint(tmp_path: Path, sig: signal.Signals) -> None:
    server = start_gslbd(tmp_path, CONFIG, zone=ZONE)
    port = server.port
    assert server.stop(sig) == 0
    assert "stopping" in server.log()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_sighup_reloads_the_config_file(tmp_path: Path) -> None:
    server = start_gslbd(tmp_path, CONFIG, zone=ZONE)
    try:
        assert server.ask(f"info.{ZONE}", "TXT").answer[0][0].to_text() == '"hello from gslbd"'
        server.config_path.write_text(server.config_path.read_text().replace("hello from gslbd", "reloaded"))
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if server.ask(f"info.{ZONE}", "TXT").answer[0][0].to_text() == '"reloaded"':
                break
            time.sleep(0.05)
        assert server.ask(f"info.{ZONE}", "TXT").answer[0][0].to_text() == '"reloaded"'
        # A broken file on reload keeps the previous config serving.
        server.config_path.write_text(BROKEN)
        server.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert server.alive()
        assert server.ask(f"info.{ZONE}", "TXT").answer[0][0].to_text() == '"reloaded"'
        assert "reload of" in server.log()
    finally:
        server.kill()


def port_5353_is_free() -> bool:
    try:
        for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
            with socket.socket(socket.AF_INET, kind) as s:
                s.bind(("127.0.0.1", 5353))
    except OSError:
        return False
    return True


@pytest.mark.slow
def test_serve_without_config_serves_the_bundled_example_on_5353(tmp_path: Path) -> None:
    if not port_5353_is_free():
        pytest.skip("127.0.0.1:5353 is in use")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(gslbd_command("serve"), stdout=out, stderr=subprocess.STDOUT)
    try:
        query = dns.message.make_query("failover.gslb.example.com.", dns.rdatatype.A)
        deadline = time.monotonic() + 30
        reply = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                reply = dns.query.udp(query, "127.0.0.1", port=5353, timeout=0.2)
                break
            except (dns.exception.Timeout, OSError):
                time.sleep(0.05)
        assert reply is not None, log.read_text()
        assert reply.rcode() == dns.rcode.NOERROR
        assert [rd.to_text() for rd in reply.answer[0]] == ["198.51.100.20"]
        assert "dig @127.0.0.1 -p 5353 geo.gslb.example.com. A +subnet=10.1.0.0/16" in log.read_text()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0


def test_check_refuses_a_config_without_zones_unless_allowed(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    out = gslbd("check", "--config", str(path))
    assert out.returncode == 1
    assert f"{path}: zones: no zone is configured, so every query would be answered REFUSED" in out.stdout
    allowed = gslbd("check", "--allow-no-zones", "--config", str(path))
    assert allowed.returncode == 0, allowed.stdout


def test_check_opens_the_geoip_database_as_a_reload_would(tmp_path: Path) -> None:
    bogus = tmp_path / "GeoLite2-City.mmdb"
    bogus.write_text("not a database")
    path = tmp_path / "geo.yaml"
    path.write_text(
        BROKEN.split("services:", maxsplit=1)[0].replace("99999", "5353")
        + f"topology: {{geoip: {{database: {bogus}}}}}\n"
    )
    out = gslbd("check", "--config", str(path))
    assert out.returncode == 1
    line = path.read_text().splitlines().index(f"topology: {{geoip: {{database: {bogus}}}}}") + 1
    assert f"error: {path}:{line}: topology.geoip.database: cannot open GeoIP database" in out.stdout
