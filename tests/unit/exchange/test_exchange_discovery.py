"""`peers.discover: ns`: peer sites from the zones' k8gb-style NS names, and `peers.port`."""

from __future__ import annotations

from pathlib import Path

import pytest
from exchange_support import SERVICES, config

from gslbd.app.reconcile import probed_endpoints
from gslbd.config import check_config
from gslbd.config.discovery import ns_site
from gslbd.model.config import ListenAddress, PeerSite


@pytest.mark.parametrize(
    ("ns_name", "origin", "site"),
    [
        ("gslb-ns-eu-gslb.example.com.", "gslb.example.com.", "eu"),  # zone relative to the parent
        ("gslb-ns-eu-cloud.example.com.", "cloud.example.com.", "eu"),
        ("gslb-ns-us-east-1-cloud.example.com.", "cloud.example.com.", "us-east-1"),  # dashes in the site
        ("gslb-ns-eu-cloud-example-com.example.com.", "cloud.example.com.", "eu"),  # the whole zone dashed
        ("gslb-ns-ap-a-b.example.com.", "a.b.example.com.", "ap"),  # a deeper zone
        ("ns1.example.com.", "cloud.example.com.", None),
        ("gslb-ns-cloud.example.com.", "cloud.example.com.", None),  # no site
        ("gslb-ns-eu-other.example.com.", "cloud.example.com.", None),  # another zone's name
    ],
)
def test_the_site_is_read_from_a_k8gb_nameserver_name(ns_name: str, origin: str, site: str | None) -> None:
    assert ns_site(ns_name, origin) == site


def test_discover_ns_makes_every_other_named_site_a_peer_at_its_glue_address() -> None:
    cfg = config("eu", peers="  discover: ns\n  port: 5300\n")
    assert cfg.peers is not None
    assert cfg.peers.port == 5300
    assert cfg.peers.sites == (
        PeerSite("us", (ListenAddress("127.0.0.3", 5300),)),
        PeerSite("ap", (ListenAddress("127.0.0.4", 5300),)),
    )


def test_discovered_peers_are_not_probed_here() -> None:
    checked = SERVICES.replace("policy: failover", "policy: failover\n    check: {type: tcp, port: 80}")
    cfg = config("eu", services=checked, peers="  discover: ns\n")
    assert sorted(address for _, address in probed_endpoints(cfg)) == ["192.0.2.1", "2001:db8::1"]


def test_a_listed_site_keeps_its_nameservers_and_one_without_gets_the_discovered_ones() -> None:
    peers = '  discover: ns\n  sites:\n    - {name: us, nameservers: ["10.0.0.3:53"]}\n    - {name: ap}\n'
    cfg = config("eu", peers=peers)
    assert cfg.peers is not None
    assert cfg.peers.sites == (
        PeerSite("us", (ListenAddress("10.0.0.3", 53),)),
        PeerSite("ap", (ListenAddress("127.0.0.4", 53),)),
    )


def test_discovery_warns_when_a_named_site_has_no_address(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        """\
site: {name: eu}
zones:
  - origin: cloud.example.com.
    nameservers:
      - {name: gslb-ns-eu-cloud.example.com., address: 192.0.2.53}
      - {name: gslb-ns-us-cloud.example.com.}
services:
  - name: app
    endpoints: [{address: 192.0.2.1}]
peers: {discover: ns}
"""
    )
    cfg, problems = check_config(str(path))
    assert cfg is not None and cfg.peers is not None
    assert cfg.peers.sites == ()
    messages = [p.message for p in problems]
    assert "discovered peer site 'us' has no nameserver address (glue): not polled" in messages


def test_peers_port_must_be_a_port(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        "zones: [{origin: x.test., nameservers: [{name: ns.x.test., address: 192.0.2.1}]}]\n"
        "peers: {discover: ns, port: 70000}\n"
    )
    cfg, problems = check_config(str(path))
    assert cfg is None
    assert any(p.path == "peers.port" and p.severity == "error" for p in problems)
