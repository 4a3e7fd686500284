"""Which nameservers `gslbd audit` compares: this site and its peers, or the zones' nameservers; and
the exit code 2 when there is nothing to compare."""

from __future__ import annotations

from pathlib import Path

import pytest

from gslbd.audit.ask import AuditSite, audit_sites, settle_time
from gslbd.cli.main import main
from gslbd.config import load_config_text
from gslbd.model.config import ListenAddress

ZONE = """\
version: 1
site: {name: eu}
dns: {listen: ["0.0.0.0:5300", "[::1]:5301"]}
zones:
  - origin: gslb.test.
    nameservers:
      - {name: ns1.gslb.test., address: 127.0.0.2}
      - {name: ns2.gslb.test., addresses: [127.0.0.3, "::1"]}
      - {name: ns.elsewhere.example.}
"""
PEERS = """\
peers:
  interval: 2s
  timeout: 500ms
  sites:
    - {name: us, nameservers: ["127.0.0.3:5300"]}
"""


def test_with_peers_this_site_at_its_listeners_comes_first_then_each_peer() -> None:
    config = load_config_text(ZONE + PEERS)
    assert audit_sites(config) == [
        AuditSite("eu", (ListenAddress("127.0.0.1", 5300), ListenAddress("::1", 5301))),
        AuditSite("us", (ListenAddress("127.0.0.3", 5300),)),
    ]
    assert settle_time(config) == 2.5


def test_without_peers_each_zone_nameserver_with_addresses_is_compared_on_the_port() -> None:
    config = load_config_text(ZONE)
    assert audit_sites(config, 5353) == [
        AuditSite("ns1.gslb.test.", (ListenAddress("127.0.0.2", 5353),)),
        AuditSite("ns2.gslb.test.", (ListenAddress("127.0.0.3", 5353), ListenAddress("::1", 5353))),
    ]
    assert settle_time(config) == 0.0


def test_an_audit_with_fewer_than_two_sites_exits_2_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(ZONE.replace('      - {name: ns2.gslb.test., addresses: [127.0.0.3, "::1"]}\n', ""))
    assert main(["audit", "--config", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"gslbd audit: {path}: fewer than two sites to compare (no peers.sites with nameservers, and "
        "fewer than two zone nameservers with addresses)\n"
    )
