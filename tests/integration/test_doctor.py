"""`gslbd doctor` against a real parent zone (NSD) and two real gslbd sites on loopback: a correct
delegation passes, a wrong glue, a partial NS set and a missing delegation fail with the right hint,
an unreachable peer fails, and a site whose every check passes exits 0."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.message
import dns.query
import dns.rdatatype
import pytest
from gslbd_harness import Running, free_port, gslbd_command, wait_until_answering
from health_app_support import ThreadedBackend
from nsd_support import Nsd, nsd_binary, running_nsd

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(nsd_binary() is None, reason="nsd is not installed (scripts/test installs it)"),
]

ZONE = "gslb.example.com."
PARENT_ZONE = """\
$ORIGIN example.com.
$TTL 60
@ SOA ns.example.com. hostmaster.example.com. 1 3600 600 86400 60
@ NS ns.example.com.
ns A 127.0.0.1
gslb NS ns-eu.gslb.example.com.
gslb NS ns-us.gslb.example.com.
ns-eu.gslb A 127.0.0.1
ns-us.gslb A 127.0.0.2
wrong NS ns1.wrong.example.com.
ns1.wrong A 127.0.0.9
partial NS ns1.partial.example.com.
ns1.partial A 127.0.0.1
"""


def site_config(name: str, port: int, peers: str, backend: int, *, broken_zones: bool) -> str:
    host = {"eu": "127.0.0.1", "us": "127.0.0.2"}[name]
    extra_zones = (
        """
  - origin: wrong.example.com.
    nameservers: [{name: ns1.wrong.example.com., address: 127.0.0.1}]
  - origin: missing.example.com.
    nameservers: [{name: ns1.missing.example.com., address: 127.0.0.1}]
  - origin: partial.example.com.
    nameservers:
      - {name: ns1.partial.example.com., address: 127.0.0.1}
      - {name: ns2.partial.example.com., address: 127.0.0.1}
"""
        if broken_zones
        else "\n"
    )
    locality = {"eu": "{region: region-1, zone: zone-a}", "us": "{region: region-2, zone: zone-c}"}
    other = "us" if name == "eu" else "eu"
    return f"""
version: 1
site: {{name: {name}, locality: {locality[name]}}}
sites:
  {other}: {{locality: {locality[other]}}}
dns: {{listen: ["{host}:{port}"], lame_duck: 0s}}
zones:
  - origin: {ZONE}
    nameservers:
      - {{name: ns-eu.{ZONE}, address: 127.0.0.1}}
      - {{name: ns-us.{ZONE}, address: 127.0.0.2}}{extra_zones.rstrip()}
checks:
  web: {{type: http, port: {backend}, path: /healthz, interval: 500ms, timeout: 300ms}}
services:
  - name: app.{ZONE}
    locality_names: true
    check: web
    endpoints:
      - {{address: 192.0.2.10, site: eu, probe_address: 127.0.0.1}}
      - {{address: 198.51.100.30, site: us, probe_address: 127.0.0.1}}
peers:
  interval: 1s
  sites:
{peers}
"""


@dataclass
class World:
    parent: Nsd
    eu: Running
    us: Running
    ports: dict[str, int]
    workdir: Path

    def doctor(self, site: str, *args: str) -> tuple[int, str]:
        path = self.workdir / f"{site}.yaml"
        out = subprocess.run(
            gslbd_command("doctor", "--config", str(path), "--timeout", "1", *args),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return out.returncode, out.stdout + out.stderr

    def sub(self, text: str) -> str:
        for key, port in self.ports.items():
            text = text.replace(f"@{key}@", str(port))
        return text


def start_site(workdir: Path, name: str, host: str, port: int, text: str) -> Running:
    config_path = workdir / f"{name}.yaml"
    config_path.write_text(text)
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            gslbd_command("serve", "--config", str(config_path)),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Running(proc, port, (host,), config_path, log_path, ZONE)
    wait_until_answering(server)
    return server


def wait_for_heartbeat(server: Running, site: str, timeout: float = 10.0) -> None:
    query = dns.message.make_query(f"heartbeat-{site}.{ZONE}", dns.rdatatype.TXT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = dns.query.udp(query, server.host, port=server.port, timeout=1)
        beats = [b"".join(rd.strings) for rrset in reply.answer for rd in rrset]
        if beats and float(beats[0]) > 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"{site} publishes no heartbeat within {timeout}s:\n{server.log()}")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("doctor")
    backend = ThreadedBackend()
    ports = {
        "EU": free_port(("127.0.0.1",)),
        "US": free_port(("127.0.0.2",)),
        "AP": free_port(("127.0.0.3",)),  # nothing listens there: an unreachable peer
    }
    eu_peers = f'    - {{name: us, nameservers: ["127.0.0.2:{ports["US"]}"]}}\n'
    eu_peers += f'    - {{name: ap, nameservers: ["127.0.0.3:{ports["AP"]}"]}}'
    us_peers = f'    - {{name: eu, nameservers: ["127.0.0.1:{ports["EU"]}"]}}'
    eu_text = site_config("eu", ports["EU"], eu_peers, backend.port, broken_zones=True)
    us_text = site_config("us", ports["US"], us_peers, backend.port, broken_zones=False)
    eu = us = None
    try:
        with running_nsd(workdir / "nsd", "example.com.", PARENT_ZONE) as parent:
            ports["PARENT"] = parent.port
            eu = start_site(workdir, "eu", "127.0.0.1", ports["EU"], eu_text)
            us = start_site(workdir, "us", "127.0.0.2", ports["US"], us_text)
            wait_for_heartbeat(eu, "eu")
            wait_for_heartbeat(us, "us")
            yield World(parent, eu, us, ports, workdir)
    finally:
        for site in (eu, us):
            if site is not None:
                site.kill()
        backend.close()


def test_doctor_passes_a_correct_delegation_and_fails_each_broken_one_with_its_hint(world: World) -> None:
    code, out = world.doctor("eu", "--parent-server", f"127.0.0.1:{world.ports['PARENT']}")
    # Unset soa.serial is the Unix time the zone's data was first served (app/serials.py): not compared.
    lines = [re.sub(r"serial \d+$", "serial 1", line) for line in out.splitlines()]
    expected = [
        "zone gslb.example.com.",
        "PASS  delegation of gslb.example.com. in example.com. (asked 127.0.0.1:@PARENT@): "
        "NS ns-eu.gslb.example.com., ns-us.gslb.example.com.",
        "PASS  glue of gslb.example.com. in example.com.: "
        "ns-eu.gslb.example.com. 127.0.0.1, ns-us.gslb.example.com. 127.0.0.2",
        "PASS  no DS record for gslb.example.com. in example.com. (the zone is unsigned): NOERROR, none",
        "PASS  nameserver ns-eu.gslb.example.com. (127.0.0.1:@EU@) answers SOA "
        "gslb.example.com. with AA: serial 1",
        "PASS  nameserver ns-us.gslb.example.com. (127.0.0.2:@US@) answers SOA "
        "gslb.example.com. with AA: serial 1",
        "zone wrong.example.com.",
        "PASS  delegation of wrong.example.com. in example.com. (asked "
        "127.0.0.1:@PARENT@): NS ns1.wrong.example.com.",
        "FAIL  glue of wrong.example.com. in example.com.: "
        "ns1.wrong.example.com. has 127.0.0.9 in example.com., the config says 127.0.0.1",
        "      hint: resolvers reach wrong.example.com. through these "
        "addresses: set them in the zone example.com. "
        "to ns1.wrong.example.com. A 127.0.0.1 (and remove the wrong ones)",
        "PASS  no DS record for wrong.example.com. in example.com. (the zone is unsigned): NOERROR, none",
        "PASS  nameserver ns1.wrong.example.com. (127.0.0.1:@EU@) answers SOA "
        "wrong.example.com. with AA: serial 1",
        "zone missing.example.com.",
        "FAIL  delegation of missing.example.com. in example.com. (asked 127.0.0.1:@PARENT@): "
        "example.com. does not delegate missing.example.com. (NXDOMAIN)",
        "      hint: add to the zone example.com. (at the registrar or the parent's DNS provider): "
        "missing.example.com. NS ns1.missing.example.com.; ns1.missing.example.com. A 127.0.0.1",
        "PASS  nameserver ns1.missing.example.com. (127.0.0.1:@EU@) answers "
        "SOA missing.example.com. with AA: serial 1",
        "zone partial.example.com.",
        "FAIL  delegation of partial.example.com. in example.com. (asked 127.0.0.1:@PARENT@): "
        "the parent lists NS ns1.partial.example.com.; missing ns2.partial.example.com.",
        "      hint: make the NS set of partial.example.com. in example.com. "
        "exactly the configured nameservers: "
        "ns1.partial.example.com., ns2.partial.example.com. (add ns2.partial.example.com.)",
        "PASS  glue of partial.example.com. in example.com.: ns1.partial.example.com. 127.0.0.1",
        "PASS  no DS record for partial.example.com. in example.com. (the zone is unsigned): NOERROR, none",
        "PASS  nameserver ns1.partial.example.com. (127.0.0.1:@EU@) answers "
        "SOA partial.example.com. with AA: serial 1",
        "PASS  nameserver ns2.partial.example.com. (127.0.0.1:@EU@) answers "
        "SOA partial.example.com. with AA: serial 1",
        "names (asked at 127.0.0.1:@EU@)",
        "PASS  service app.gslb.example.com.: A 192.0.2.10 198.51.100.30",
        "PASS  locality name app.region-1.gslb.example.com. (region region-1): A 192.0.2.10",
        "PASS  locality name app.region-2.gslb.example.com. (region region-2): A 198.51.100.30",
        "PASS  locality name app.zone-a.region-1.gslb.example.com. (zone "
        "zone-a of region region-1): A 192.0.2.10",
        "PASS  locality name app.zone-c.region-2.gslb.example.com. (zone zone-c of region region-2): "
        "A 198.51.100.30",
        "peers",
    ]
    expected = [world.sub(line) for line in expected]
    assert lines[: len(expected)] == expected, out
    peers = lines[len(expected) :]
    assert peers[0].startswith(
        world.sub("PASS  peer us at 127.0.0.2:@US@: serves gslb.example.com., heartbeat ")
    ), out
    assert peers[1:] == [
        world.sub("FAIL  peer ap at 127.0.0.3:@AP@: no answer to SOA gslb.example.com. (timeout after 1 s)"),
        "      hint: is gslbd running at site ap? check peers.sites[ap].nameservers and firewalls",
        "23 checks: 19 passed, 4 failed",
    ], out
    assert code == 1


def test_doctor_exits_0_when_every_check_passes(world: World) -> None:
    code, out = world.doctor("us", "--parent-server", f"127.0.0.1:{world.ports['PARENT']}")
    assert "FAIL" not in out, out
    assert out.splitlines()[-1] == "11 checks: 11 passed, 0 failed", out
    assert world.sub("PASS  peer eu at 127.0.0.1:@EU@: serves gslb.example.com., heartbeat") in out
    assert code == 0


def test_doctor_fails_the_delegation_when_the_parent_server_does_not_answer(world: World) -> None:
    code, out = world.doctor("us", "--parent-server", f"127.0.0.3:{world.ports['AP']}")
    assert (
        world.sub(
            "FAIL  delegation of gslb.example.com. in example.com. (asked 127.0.0.3:@AP@): "
            "no answer (timeout after 1 s)"
        )
        in out.splitlines()
    ), out
    assert (
        "      hint: check that --parent-server is a nameserver of the parent zone and reachable "
        "(UDP and TCP); without it the parent's nameservers are found through this machine's resolver"
    ) in out.splitlines()
    assert code == 1


def test_doctor_rejects_a_malformed_parent_server(world: World) -> None:
    code, out = world.doctor("us", "--parent-server", "127.0.0.1:99999")
    assert code == 2
    assert (
        out == "gslbd doctor: --parent-server: '127.0.0.1:99999': the port must be a number from 1 to 65535\n"
    )
