"""The command line an operator meets first: --version, bare `gslbd`, `serve --listen`, the advice when a
port below 1024 is refused, and `check`'s error:/warning: prefixes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from dns_config import CONFIG, ZONE
from gslbd_harness import free_port, gslbd_command, start_gslbd
from health_app_support import wait_until

from gslbd import __version__


def gslbd(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gslbd_command(*args), capture_output=True, text=True, timeout=60, check=False, **kwargs
    )


def test_version_flag_prints_the_version() -> None:
    out = gslbd("--version")
    assert (out.returncode, out.stdout) == (0, f"gslbd {__version__}\n")


def test_bare_gslbd_prints_help_and_exits_0() -> None:
    out = gslbd()
    assert out.returncode == 0
    assert out.stdout.startswith("usage: gslbd")
    assert "serve" in out.stdout and "check" in out.stdout
    assert out.stderr == ""


def test_serve_listen_replaces_dns_listen_and_survives_a_reload(tmp_path: Path) -> None:
    unused = free_port()
    port = free_port()
    server = start_gslbd(
        tmp_path,
        CONFIG.replace("@LISTEN@", f'["127.0.0.1:{unused}"]'),
        zone=ZONE,
        port=port,
        extra_args=("--listen", f"127.0.0.1:{port}", "--listen", f"127.0.0.1:{port}"),
    )
    try:
        assert "ANSWER: 1" in server.dig(ZONE, "SOA")
        assert "no servers could be reached" in server.dig(ZONE, "SOA", "-p", str(unused))
        os.kill(server.proc.pid, signal.SIGHUP)
        wait_until(lambda: "reloaded" in server.log())
        assert "ANSWER: 1" in server.dig(ZONE, "SOA")
        assert "take effect at the next restart" not in server.log()
    finally:
        server.kill()


@pytest.mark.parametrize("bad", ["127.0.0.1", "[::1]", "localhost:53", "127.0.0.1:70000"])
def test_serve_listen_refuses_what_is_not_host_port(bad: str) -> None:
    out = gslbd("serve", "--listen", bad)
    assert out.returncode == 2
    assert "argument --listen:" in out.stderr


def test_a_refused_port_below_1024_explains_the_capability_and_the_unit(tmp_path: Path) -> None:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    if int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text()) <= 53:
        pytest.skip("this kernel lets any user bind port 53 (ip_unprivileged_port_start)")
    path = tmp_path / "low.yaml"
    path.write_text(CONFIG.replace("@LISTEN@", '["127.0.0.1:53"]'))
    # Without CAP_NET_BIND_SERVICE (even as root) the kernel refuses port 53 with EACCES.
    command = [setpriv, "--bounding-set", "-net_bind_service", *gslbd_command("serve", "-c", str(path))]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1
    assert "gslbd: cannot listen on 127.0.0.1:53: [Errno 13] Permission denied" in out.stderr
    assert "port 53 is below 1024" in out.stderr
    assert "CAP_NET_BIND_SERVICE" in out.stderr
    assert "deploy/systemd/gslbd.service" in out.stderr
    assert "run_as" in out.stderr


def test_check_prefixes_every_problem_with_error_or_warning(tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    text = CONFIG.replace("@LISTEN@", '["127.0.0.1:99999"]') + "run_as: {user: no-such-user-here}\n"
    path.write_text(text)
    out = gslbd("check", "--config", str(path))
    assert out.returncode == 1
    problems = out.stdout.splitlines()[:-1]
    assert problems == [
        f"error: {path}:7: dns.listen[0]: '127.0.0.1:99999': port must be between 0 and 65535",
        f"warning: {path}:{len(text.splitlines())}: run_as.user: no user 'no-such-user-here' on this "
        "machine: gslbd serve will refuse to start here",
    ]
    assert out.stdout.splitlines()[-1] == f"{path}: 1 error, 1 warning"
