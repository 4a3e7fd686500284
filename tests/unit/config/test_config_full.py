"""The complete example (every key of config.md) and the defaults of a minimal config."""

from __future__ import annotations

import ipaddress
from importlib import resources
from pathlib import Path

from gslbd.config import check_config, load_config, load_config_text
from gslbd.model import (
    ApiConfig,
    Check,
    ClusterConfig,
    DnsConfig,
    ListenAddress,
    Locality,
    Nameserver,
    NetworkEntry,
    PeersConfig,
    PeerSite,
    RedisConfig,
    SiteConfig,
    SiteInfo,
    Soa,
    StaticRecord,
    Topology,
)
from gslbd.model.config import LogConfig
from gslbd.model.service import MinHealthy
from gslbd.types import (
    AdminState,
    AllDown,
    CheckType,
    Discover,
    EndpointKind,
    HealthMode,
    LogFormat,
    LogLevel,
    PolicyName,
    SyncMode,
)

FULL = Path(str(resources.files("gslbd") / "examples" / "full.yaml"))
EU = Locality("europe-west1", "europe-west1-b")
US = Locality("us-east1")


def test_full_example_has_no_problems_but_its_secrets_in_a_world_readable_file() -> None:
    config, problems = check_config(FULL)
    assert config is not None
    readable = bool(FULL.stat().st_mode & 0o004)
    expected = [("api.token", "warning"), ("cluster.redis.password", "warning")] if readable else []
    assert [(p.path, p.severity) for p in problems] == expected


def test_full_example_top_level_sections() -> None:
    config = load_config(FULL)
    assert config.version == 1
    assert config.source == str(FULL)
    assert config.site == SiteConfig("eu", EU)
    assert config.dns == DnsConfig(
        listen=(ListenAddress("127.0.0.1", 5353), ListenAddress("::1", 5353)),
        workers=1,
        max_udp_payload=1232,
        tcp_idle_timeout=10.0,
    )
    assert config.api == ApiConfig(ListenAddress("127.0.0.1", 8080), token="change-me")
    assert config.cluster == ClusterConfig(
        RedisConfig("redis://127.0.0.1:6379/0", None, "gslb:", SyncMode.LOCK)
    )
    assert config.peers == PeersConfig(
        interval=5.0,
        stale_after=300.0,
        timeout=1.0,
        notify=True,
        sites=(PeerSite("us", (ListenAddress("127.0.0.3", 5353),)),),
        discover=Discover.STATIC,
    )
    assert config.topology == Topology(
        networks=(
            NetworkEntry(ipaddress.ip_network("10.1.0.0/16"), "eu", EU),
            NetworkEntry(ipaddress.ip_network("2001:db8:1::/48"), "us", Locality()),
        ),
        geoip_database=None,
        use_client_subnet=True,
    )
    assert config.log == LogConfig(LogFormat.TEXT, LogLevel.INFO, None)
    # site.locality wins for this site; coordinates come from `sites:`
    assert config.sites == (
        SiteInfo("eu", EU, (50.4, 3.8)),
        SiteInfo("us", US, (39.0, -77.5)),
    )


def test_full_example_zone_with_derived_soa_fields() -> None:
    (zone,) = load_config(FULL).zones
    assert zone.origin == "gslb.example.com."
    assert (zone.ttl, zone.negative_ttl) == (30, 30)
    assert zone.soa == Soa(
        mname="gslb-ns-eu-gslb.example.com.",
        rname="hostmaster.example.com.",
        serial=1,
        refresh=14400,
        retry=3600,
        expire=604800,
        minimum=300,
        automatic=True,  # no soa.serial: the app stamps it (app/serials.py)
    )
    assert zone.nameservers == (
        Nameserver("gslb-ns-eu-gslb.example.com.", ("127.0.0.2",)),
        Nameserver("gslb-ns-us-gslb.example.com.", ("127.0.0.3",)),
    )
    assert zone.records == (
        StaticRecord("www.gslb.example.com.", "CNAME", "app.gslb.example.com.", 30),
        StaticRecord("info.gslb.example.com.", "TXT", '"hello"', 30),
    )


def test_full_example_checks_of_every_type() -> None:
    checks = {c.name: c for c in load_config(FULL).checks}
    assert list(checks) == ["web", "secure", "port", "resolver", "rpc", "ping", "script"]
    assert checks["web"] == Check(
        name="web",
        type=CheckType.HTTP,
        port=8080,
        interval=5.0,
        timeout=2.0,
        rise=2,
        fall=3,
        path="/healthz",
        host="app.example.com",
        expect_status=(200,),
        expect_body="ok",
    )
    assert checks["secure"] == Check("secure", CheckType.HTTPS, headers=(("X-Probe", "gslbd"),))
    assert checks["secure"].effective_port() == 443
    assert checks["port"] == Check("port", CheckType.TCP, port=5432)
    assert checks["resolver"] == Check("resolver", CheckType.DNS, query="health.example.com.")
    assert checks["rpc"] == Check("rpc", CheckType.GRPC, port=9090, service="grpc.health.v1.Health")
    assert checks["ping"] == Check("ping", CheckType.ICMP, count=2)
    assert checks["script"] == Check("script", CheckType.EXEC, command=("/bin/true",))


def test_full_example_failover_service() -> None:
    config = load_config(FULL)
    checks = {c.name: c for c in config.checks}
    app = config.services[0]
    assert (app.name, app.zone, app.label) == ("app.gslb.example.com.", "gslb.example.com.", "app")
    assert app.policy is PolicyName.FAILOVER
    assert app.failover_order == ("eu", "us")
    assert (app.weights, app.ttl, app.max_answers) == (None, 30, 8)
    assert (app.all_down, app.fallback, app.locality_names) == (AllDown.SERVE_ALL, (), False)
    assert app.min_healthy == MinHealthy(share=0.5)
    assert (app.failover_delay, app.failback_delay, app.ttl_range) == (10.0, 60.0, None)
    first, second = app.endpoints
    assert first.key == ("app.gslb.example.com.", "192.0.2.10")
    assert (first.kind, first.site, first.locality) == (EndpointKind.IPV4, "eu", EU)
    assert (first.weight, first.priority, first.probe_address, first.admin) == (
        1,
        0,
        "10.0.0.10",
        AdminState.OBEY,
    )
    assert first.check == checks["web"]
    # the service's default check, and the owning site's locality from `sites:`
    assert (second.site, second.locality, second.check) == ("us", US, checks["web"])


def test_full_example_weighted_service_with_inline_check() -> None:
    shop = load_config(FULL).services[1]
    assert (shop.name, shop.label, shop.policy) == ("shop.gslb.example.com.", "shop", PolicyName.WEIGHTED)
    assert shop.weights == (("eu", 70), ("us", 30))
    assert (shop.all_down, shop.fallback) == (AllDown.FALLBACK, ("198.51.100.1",))
    inline = Check("shop.gslb.example.com.#inline", CheckType.TCP, port=443)
    v4, v6, us = shop.endpoints
    assert (v4.address, v4.site, v4.locality, v4.check) == ("192.0.2.20", "eu", EU, inline)
    assert (v6.address, v6.kind, v6.check) == ("2001:db8::20", EndpointKind.IPV6, None)
    assert (us.site, us.locality, us.check) == ("us", US, inline)


def test_full_example_check_none_and_endpoint_overrides() -> None:
    config = load_config(FULL)
    api, static = config.services[2], config.services[3]
    assert api.policy is PolicyName.GEO and api.locality_names is True
    assert [e.check for e in api.endpoints] == [None, None]
    assert [e.check.name if e.check else None for e in static.endpoints] == [
        "port",
        "resolver",
        "rpc",
        "ping",
        "script",
        None,
    ]
    several = static.endpoints[-1].checks
    assert several is not None and several.names == ("secure", "port")
    assert several.health is HealthMode.ALL  # the endpoint's own; the service's is any


MINIMAL = """\
zones:
  - origin: Gslb.Example.COM
    nameservers: [{name: ns1, address: 127.0.0.2}]
services:
  - name: app
    endpoints: [{address: 192.0.2.1}]
"""


def test_minimal_config_gets_every_documented_default() -> None:
    config = load_config_text(MINIMAL)
    assert config.version == 1
    assert config.site == SiteConfig("local", Locality())
    assert config.dns == DnsConfig((ListenAddress("0.0.0.0", 53),), 1, 1232, 10.0)
    assert (config.api, config.cluster, config.peers) == (None, None, None)
    assert config.topology == Topology((), None, True)
    assert config.checks == ()
    assert config.sites == (SiteInfo("local"),)
    (zone,) = config.zones
    assert zone.origin == "gslb.example.com."
    assert (zone.ttl, zone.negative_ttl, zone.records) == (30, 30, ())
    assert zone.soa == Soa(
        "ns1.gslb.example.com.", "hostmaster.gslb.example.com.", 1, 14400, 3600, 604800, 300, automatic=True
    )
    (app,) = config.services
    assert (app.name, app.zone, app.label) == ("app.gslb.example.com.", "gslb.example.com.", "app")
    assert (app.policy, app.failover_order, app.weights) == (PolicyName.ROUND_ROBIN, (), None)
    assert (app.ttl, app.max_answers, app.all_down, app.fallback) == (30, 8, AllDown.SERVE_ALL, ())
    assert app.locality_names is False
    assert app.min_healthy is None
    assert (app.failover_delay, app.failback_delay, app.ttl_range) == (0.0, 0.0, None)
    (endpoint,) = app.endpoints
    assert (endpoint.site, endpoint.locality, endpoint.weight, endpoint.priority) == (
        "local",
        Locality(),
        1,
        0,
    )
    assert (endpoint.check, endpoint.probe_address, endpoint.admin) == (None, None, AdminState.OBEY)


def test_soa_defaults_follow_the_zone_and_explicit_values_win() -> None:
    config = load_config_text(
        """\
zones:
  - origin: gslb.example.com.
    ttl: 60
    negative_ttl: 2m
    soa: {serial: 2024010101, rname: dns-admin@example.com, refresh: 1h, retry: 300, expire: 7d}
"""
    )
    (zone,) = config.zones
    assert (zone.ttl, zone.negative_ttl) == (60, 120)
    assert zone.soa == Soa(
        "ns1.gslb.example.com.", "dns-admin.example.com.", 2024010101, 3600, 300, 604800, 300
    )


def test_soa_timer_defaults_pass_zonemaster_while_the_negative_ttl_stays_its_own_key() -> None:
    """refresh >= 14400, retry >= 3600, expire >= 604800 and a MINIMUM field >= 300; a denial is still
    cached for min(ttl, negative_ttl), the TTL of the SOA in it."""
    from gslbd.answer.view import negative_soa_ttl

    for negative, minimum, cached in (("30", 300, 30), ("10m", 600, 60)):
        text = f"zones:\n  - origin: gslb.example.com.\n    ttl: 60\n    negative_ttl: {negative}\n"
        (zone,) = load_config_text(text).zones
        soa = zone.soa
        assert (soa.refresh, soa.retry, soa.expire, soa.minimum) == (14400, 3600, 604800, minimum)
        assert negative_soa_ttl(zone) == cached


def test_service_ttl_defaults_to_its_zone_ttl() -> None:
    config = load_config_text(MINIMAL.replace("    nameservers:", "    ttl: 45\n    nameservers:"))
    assert config.services[0].ttl == 45


def test_config_sites_lists_every_site_named_anywhere() -> None:
    config = load_config_text(
        """\
site: {name: eu, locality: {region: europe-west1}}
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
sites:
  us: {locality: {region: us-east1}}
services:
  - name: app
    policy: failover
    failover_order: [ap, eu]
    endpoints:
      - {address: 192.0.2.1}
      - {address: 192.0.2.2, site: sa}
      - {address: 192.0.2.3, site: ap}
topology:
  networks: [{cidr: 10.0.0.0/8, site: af}]
peers:
  sites: [{name: oc, nameservers: ["127.0.0.9"]}]
"""
    )
    assert config.sites == (
        SiteInfo("eu", Locality("europe-west1")),
        SiteInfo("us", US),
        SiteInfo("ap"),
        SiteInfo("sa"),
        SiteInfo("oc"),
        SiteInfo("af"),
    )
    assert config.peers is not None
    assert config.peers.sites == (PeerSite("oc", (ListenAddress("127.0.0.9", 53),)),)
    assert [e.locality for e in config.services[0].endpoints] == [
        Locality("europe-west1"),
        Locality(),
        Locality(),
    ]
