"""`gslbd whatif` on a capture gslbd wrote itself: gslbd serves with log.dnstap to a file (read back by
Debian's own dnstap reader, `dnstap -r`), clients of two sites' networks ask, gslbd stops; then
`gslbd whatif` replays the file through the config and a candidate (an admin change, an endpoint
removed) and its figures are checked exactly."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import dns.message
import dns.query
import dns.rdatatype
import pytest
from gslbd_harness import free_port, gslbd_command, running_gslbd
from health_app_support import wait_until

ZONE = "gslb.example.com."
GEO, US_ONLY = f"geo.{ZONE}", f"usonly.{ZONE}"
EU_CLIENT, US_CLIENT = "127.0.1.5", "127.0.2.5"  # in the topology networks of eu and us

pytestmark = pytest.mark.skipif(
    shutil.which("dnstap") is None, reason="dnstap is not installed (scripts/test installs it)"
)


def config(*, dnstap: Path | None = None, us_geo: bool = True, workers: int = 1, api: str = "") -> str:
    us = "{address: 198.51.100.30, site: us}" if us_geo else ""
    log = f"log: {{dnstap: {{file: {dnstap}, queries: true, responses: false}}}}" if dnstap else ""
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s, workers: {workers}}}
zones: [{{origin: {ZONE}, nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]}}]
sites: {{eu: {{}}, us: {{}}}}
topology:
  networks: [{{cidr: 127.0.1.0/24, site: eu}}, {{cidr: 127.0.2.0/24, site: us}}]
services:
  - {{name: {GEO}, policy: geo, check: none, endpoints: [{{address: 192.0.2.30, site: eu}}, {us}]}}
  - {{name: {US_ONLY}, check: none, endpoints: [{{address: 198.51.100.60, site: us}}]}}
{log}
{api}
"""


def logged_sources(capture: Path) -> list[str]:
    """The client address of every query in the capture, as Debian's reader reads the file."""
    out = subprocess.run(
        ["dnstap", "-r", str(capture), "-j"], check=True, capture_output=True, text=True
    ).stdout
    return [json.loads(line)["message"]["query_address"] for line in out.splitlines() if line]


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The capture file and how many queries in it came from the harness (its SOA checks, 127.0.0.1)."""
    tmp = tmp_path_factory.mktemp("whatif")
    capture = tmp / "queries.dnstap"
    asked = [(EU_CLIENT, GEO)] * 3 + [(US_CLIENT, GEO)] * 2 + [(EU_CLIENT, US_ONLY), (US_CLIENT, US_ONLY)]
    with running_gslbd(tmp, config(dnstap=capture), zone=ZONE) as server:
        for source, name in asked:
            query = dns.message.make_query(name, dns.rdatatype.A)
            dns.query.udp(query, server.host, port=server.port, source=source, timeout=3)
        mine = {EU_CLIENT, US_CLIENT}
        wait_until(lambda: len([s for s in logged_sources(capture) if s in mine]) == 7)
        assert server.stop() == 0  # the writer ends the file with STOP
    sources = logged_sources(capture)
    assert set(sources) == {"127.0.0.1", EU_CLIENT, US_CLIENT}
    return capture, sources.count("127.0.0.1")


def run_whatif(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gslbd_command("whatif", *args), capture_output=True, text=True, timeout=60, check=False
    )


def whatif(tmp_path: Path, capture: Path, *args: str, candidate: str | None = None) -> str:
    path = tmp_path / "candidate.yaml"
    path.write_text((candidate or config()).replace("@LISTEN@", '["127.0.0.1:1"]'))
    current = tmp_path / "current.yaml"
    current.write_text(config().replace("@LISTEN@", '["127.0.0.1:1"]'))
    done = run_whatif("--dnstap", str(capture), "--current", str(current), "--config", str(path), *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_site_down_moves_the_eu_clients_geo_answers_to_us(tmp_path: Path, capture: tuple[Path, int]) -> None:
    path, harness = capture
    total = 7 + harness
    out = whatif(tmp_path, path, "--admin", "site=eu down")
    assert out.splitlines() == [
        f"replayed {total} queries of {path}",
        f"queries whose answer changes: 3 of {total} ({3 / total:.1%})",
        "client networks (/24, /56) with a changed answer: 1 of 3 (33.3%)",
        "services whose answer changes: 1 of 2 (50.0%)",
        f"  {GEO}",
        "load per site (endpoints answered):",
        "  site          before           after",
        "  eu         3 (42.9%)        0 (0.0%)",
        "  us         4 (57.1%)      7 (100.0%)",
    ]


def test_an_endpoint_removed_in_json(tmp_path: Path, capture: tuple[Path, int]) -> None:
    path, harness = capture
    out = json.loads(whatif(tmp_path, path, "--json", candidate=config(us_geo=False)))
    assert out == {
        "replayed": 7 + harness,
        "queries": {"changed": 2, "total": 7 + harness, "share": round(2 / (7 + harness), 6)},
        "client_networks": {"changed": 1, "total": 3, "share": round(1 / 3, 6)},
        "services": {"changed": 1, "total": 2, "share": 0.5, "changed_names": [GEO]},
        "load": {"eu": {"before": 3, "after": 5}, "us": {"before": 4, "after": 2}},
    }


def test_a_selector_that_matches_nothing_is_refused(tmp_path: Path, capture: tuple[Path, int]) -> None:
    path, _ = capture
    cfg = tmp_path / "c.yaml"
    cfg.write_text(config().replace("@LISTEN@", '["127.0.0.1:1"]'))
    done = run_whatif("--dnstap", str(path), "--config", str(cfg), "--admin", "site=ap down")
    assert done.returncode == 2
    assert done.stderr == (
        "gslbd whatif: --admin 'site=ap down' selects no endpoint of the candidate config\n"
    )
    assert done.stdout == ""


def test_with_workers_each_writes_its_own_file_and_whatif_reads_them_all(tmp_path: Path) -> None:
    capture = tmp_path / "q.dnstap"
    files = [tmp_path / "q.dnstap.1", tmp_path / "q.dnstap.2"]
    with running_gslbd(tmp_path, config(dnstap=capture, workers=2), zone=ZONE) as server:
        for _ in range(20):
            query = dns.message.make_query(GEO, dns.rdatatype.A)
            dns.query.udp(query, server.host, port=server.port, source=EU_CLIENT, timeout=3)

        def logged() -> int:
            return sum(logged_sources(f).count(EU_CLIENT) for f in files if f.exists())

        wait_until(lambda: logged() == 20)
        assert server.stop() == 0
    assert not capture.exists() and all(f.exists() for f in files)
    harness = sum(logged_sources(f).count("127.0.0.1") for f in files)
    out = json.loads(
        whatif(tmp_path, files[0], "--dnstap", str(files[1]), "--admin", "site=eu down", "--json")
    )
    assert out["replayed"] == 20 + harness
    assert out["queries"]["changed"] == 20
    assert out["load"] == {"eu": {"before": 20, "after": 0}, "us": {"before": 0, "after": 20}}


def post_whatif(port: int, body: object, token: str = "t0ken") -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/whatif",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_api_replays_the_servers_own_capture_for_a_pending_admin_change(tmp_path: Path) -> None:
    capture, port = tmp_path / "q.dnstap", free_port()
    api = f"api: {{listen: '127.0.0.1:{port}', token: t0ken}}"
    with running_gslbd(tmp_path, config(api=api), zone=ZONE) as server:
        status, body = post_whatif(port, {"admin": ["site=eu down"]})
        assert (status, body) == (
            409,
            {"error": "log.dnstap.file is not set: this server keeps no capture to replay"},
        )
    with running_gslbd(tmp_path, config(dnstap=capture, api=api), zone=ZONE) as server:
        for source in (EU_CLIENT, EU_CLIENT, US_CLIENT):
            query = dns.message.make_query(GEO, dns.rdatatype.A)
            dns.query.udp(query, server.host, port=server.port, source=source, timeout=3)
        wait_until(lambda: len([s for s in logged_sources(capture) if s != "127.0.0.1"]) == 3)
        harness = logged_sources(capture).count("127.0.0.1")
        status, body = post_whatif(port, {"admin": ["site=eu down"]})
        assert status == 200
        assert body == {
            "replayed": 3 + harness,
            "queries": {"changed": 2, "total": 3 + harness, "share": round(2 / (3 + harness), 6)},
            "client_networks": {"changed": 1, "total": 3, "share": round(1 / 3, 6)},
            "services": {"changed": 1, "total": 1, "share": 1.0, "changed_names": [GEO]},
            "load": {"eu": {"before": 2, "after": 0}, "us": {"before": 1, "after": 3}},
        }
        # Nothing was applied: eu's client still gets eu's endpoint.
        query = dns.message.make_query(GEO, dns.rdatatype.A)
        answer = dns.query.udp(query, server.host, port=server.port, source=EU_CLIENT, timeout=3)
        assert [rd.to_text() for rrset in answer.answer for rd in rrset] == ["192.0.2.30"]
        assert post_whatif(port, {"admin": ["site=ap down"]}) == (
            400,
            {"error": "admin 'site=ap down' selects no endpoint of the candidate config"},
        )
        assert post_whatif(port, {"admin": ["site=eu"]}) == (
            400,
            {"error": "admin: 'site=eu': ends with no state (obey, up, down)"},
        )
        usage = 'the body must be JSON like {"admin": ["site=eu down"], "seed": 0}'
        assert post_whatif(port, {"admin": []}) == (400, {"error": usage})
        assert post_whatif(port, {"admin": ["site=eu down"]}, token="wrong")[0] == 401
