"""Client location: topology networks by longest prefix, then a GeoIP database, else unknown."""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path
from typing import Any

import pytest
from mmdb_writer import MMDBWriter
from netaddr import IPSet

from gslbd.errors import ConfigError
from gslbd.model.config import Config, SiteConfig
from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import Locality, NetworkEntry, SiteInfo, Topology
from gslbd.policy.base import Location
from gslbd.policy.geo import Geo
from gslbd.policy.locate import TopologyLocator, build_env, location_from_record
from gslbd.types import EndpointKind, PolicyName

SITES = {
    "eu": SiteInfo("eu", Locality("europe-west3", "europe-west3-a"), (50.1, 8.7)),
    "us": SiteInfo("us", Locality("us-east4"), (39.0, -77.5)),
    "ap": SiteInfo("ap", Locality("asia-southeast1"), (1.35, 103.8)),
}
PARIS = {
    "location": {"latitude": 48.85, "longitude": 2.35},
    "country": {"iso_code": "FR"},
    "continent": {"code": "EU"},
}
TOKYO = {
    "location": {"latitude": 35.68, "longitude": 139.69},
    "country": {"iso_code": "JP"},
    "subdivisions": [{"iso_code": "13"}],
    "continent": {"code": "AS"},
}
CHICAGO = {"location": {"latitude": 41.88, "longitude": -87.63}, "country": {"iso_code": "US"}}


def ip(text: str) -> tuple[int, bool]:
    addr = ipaddress.ip_address(text)
    return int(addr), addr.version == 6


def net(entry: str, site: str | None = None, locality: Locality | None = None) -> NetworkEntry:
    return NetworkEntry(ipaddress.ip_network(entry), site, locality or Locality())


def write_mmdb(path: Path, records: dict[str, dict[str, Any]], version: int = 4) -> str:
    writer = MMDBWriter(ip_version=version, database_type="GeoLite2-City", ipv4_compatible=version == 6)
    for cidr, record in records.items():
        writer.insert_network(IPSet([cidr]), record)
    writer.to_db_file(str(path))
    return str(path)


@pytest.fixture
def city_db(tmp_path: Path) -> str:
    return write_mmdb(
        tmp_path / "city.mmdb",
        {"81.2.69.0/24": PARIS, "175.16.199.0/24": TOKYO, "10.9.0.0/16": CHICAGO},
    )


def test_longest_prefix_wins() -> None:
    locator = TopologyLocator(
        Topology(networks=(net("10.0.0.0/8", "us"), net("10.1.0.0/16", "eu"), net("10.1.2.0/24", "ap"))),
        SITES,
    )
    assert locator.locate(*ip("10.1.2.3")).how == "topology 10.1.2.0/24"
    assert locator.locate(*ip("10.1.3.3")).how == "topology 10.1.0.0/16"
    assert locator.locate(*ip("10.200.0.1")).how == "topology 10.0.0.0/8"
    assert locator.locate(*ip("11.0.0.1")) == Location()


def test_default_route_entry_matches_everything_of_its_family() -> None:
    locator = TopologyLocator(Topology(networks=(net("0.0.0.0/0", "us"),)), SITES)
    assert locator.locate(*ip("203.0.113.7")).site == "us"
    assert locator.locate(*ip("2001:db8::1")).how == "unknown"


def test_ipv6_networks_are_matched_by_their_own_table() -> None:
    locator = TopologyLocator(
        Topology(networks=(net("2001:db8:1::/48", "us"), net("2001:db8:1:ff00::/56", "ap"))), SITES
    )
    assert locator.locate(*ip("2001:db8:1:ff12::1")).site == "ap"
    assert locator.locate(*ip("2001:db8:1:1::1")).site == "us"
    assert locator.locate(*ip("2001:db8:2::1")).site is None


def test_entry_with_a_site_and_no_locality_takes_the_sites_locality_and_coordinates() -> None:
    locator = TopologyLocator(Topology(networks=(net("10.1.0.0/16", "eu"),)), SITES)
    assert locator.locate(*ip("10.1.0.1")) == Location(
        "eu", Locality("europe-west3", "europe-west3-a"), (50.1, 8.7), "topology 10.1.0.0/16"
    )


def test_entry_locality_is_kept_over_the_sites() -> None:
    entry = net("10.1.0.0/16", "eu", Locality("europe-west3", "europe-west3-c"))
    loc = TopologyLocator(Topology(networks=(entry,)), SITES).locate(*ip("10.1.0.1"))
    assert loc.locality == Locality("europe-west3", "europe-west3-c")
    assert loc.coordinates == (50.1, 8.7)


def test_entry_with_only_a_locality_has_no_site_or_coordinates() -> None:
    entry = net("10.1.0.0/16", None, Locality("us-east4"))
    loc = TopologyLocator(Topology(networks=(entry,)), SITES).locate(*ip("10.1.0.1"))
    assert loc == Location(None, Locality("us-east4"), None, "topology 10.1.0.0/16")


def test_geoip_city_record_gives_coordinates_and_names_the_fields(city_db: str) -> None:
    locator = TopologyLocator(Topology(geoip_database=city_db), SITES)
    assert locator.locate(*ip("81.2.69.160")) == Location(
        None, Locality(), (48.85, 2.35), "geoip location 48.85,2.35, country FR, continent EU", "FR", "EU"
    )
    tokyo = locator.locate(*ip("175.16.199.1"))
    assert tokyo.how == "geoip location 35.68,139.69, country JP, subdivision 13, continent AS"
    assert locator.locate(*ip("192.0.2.1")) == Location()


def test_topology_is_asked_before_geoip(city_db: str) -> None:
    locator = TopologyLocator(Topology(networks=(net("81.2.69.0/25", "us"),), geoip_database=city_db), SITES)
    assert locator.locate(*ip("81.2.69.1")).how == "topology 81.2.69.0/25"
    assert locator.locate(*ip("81.2.69.200")).how.startswith("geoip location 48.85,2.35")


def test_ipv6_client_on_an_ipv4_database_is_unknown(city_db: str) -> None:
    locator = TopologyLocator(Topology(geoip_database=city_db), SITES)
    assert locator.locate(*ip("2001:db8::1")) == Location()


def test_ipv6_database_answers_both_families(tmp_path: Path) -> None:
    path = write_mmdb(tmp_path / "v6.mmdb", {"2001:db8:5::/48": TOKYO, "::81.2.69.0/120": PARIS}, version=6)
    locator = TopologyLocator(Topology(geoip_database=path), SITES)
    assert locator.locate(*ip("2001:db8:5::1")).coordinates == (35.68, 139.69)
    assert locator.locate(*ip("81.2.69.9")).coordinates == (48.85, 2.35)


def test_country_only_record_has_no_coordinates() -> None:
    loc = location_from_record({"country": {"iso_code": "DE"}, "continent": {"code": "EU"}}, SITES)
    assert loc == Location(None, Locality(), None, "geoip country DE, continent EU", "DE", "EU")


def test_gslbd_fields_in_a_record_name_a_site() -> None:
    loc = location_from_record({"gslbd": {"site": "ap"}}, SITES)
    assert loc == Location(
        "ap", Locality("asia-southeast1"), (1.35, 103.8), "geoip gslbd.site ap, gslbd.region asia-southeast1"
    )


def test_record_without_known_fields_is_unknown() -> None:
    assert location_from_record({"isp": "Example"}, SITES) == Location()


def test_unreadable_database_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mmdb"
    bad.write_bytes(b"not a database")
    with pytest.raises(ConfigError) as info:
        TopologyLocator(Topology(geoip_database=str(bad)), SITES)
    problem = info.value.problems[0]
    assert (problem.file, problem.path) == (str(bad), "topology.geoip.database")
    assert problem.message.startswith("cannot open GeoIP database: ")


def test_missing_database_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot open GeoIP database"):
        TopologyLocator(Topology(geoip_database=str(tmp_path / "absent.mmdb")), SITES)


def test_locator_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from gslbd.policy import locate

    monkeypatch.setattr(locate, "CACHE_LIMIT", 4)
    locator = TopologyLocator(Topology(networks=(net("10.0.0.0/8", "us"),)), SITES)
    for i in range(10):
        assert locator.locate((10 << 24) + i, False).site == "us"
    assert len(locator.cache4) <= 4


def test_build_env_knows_every_site_and_implies_this_one() -> None:
    config = Config(site=SiteConfig("home", Locality("r-home")), sites=tuple(SITES.values()))
    env = build_env(config, random.Random(1))
    assert sorted(env.sites) == ["ap", "eu", "home", "us"]
    assert env.sites["home"] == SiteInfo("home", Locality("r-home"))
    assert env.locator.locate(*ip("10.0.0.1")) == Location()


def test_geo_answers_the_nearest_site_to_a_geoip_client(city_db: str) -> None:
    name = "app.gslb.example.com."
    candidates = (
        Endpoint(name, "192.0.2.1", EndpointKind.IPV4, "eu", Locality("europe-west3")),
        Endpoint(name, "198.51.100.1", EndpointKind.IPV4, "us", Locality("us-east4")),
        Endpoint(name, "203.0.113.1", EndpointKind.IPV4, "ap", Locality("asia-southeast1")),
    )
    config = Config(topology=Topology(geoip_database=city_db), sites=tuple(SITES.values()))
    env = build_env(config, random.Random(1))
    service = Service(name, "gslb.example.com.", "app", PolicyName.GEO)
    plan = Geo().plan(candidates, service, env)
    rng = random.Random(0)

    def answer(client: str) -> str:
        return plan.variants[plan.pick(*ip(client), rng, 0)][0].address

    assert answer("81.2.69.160") == "192.0.2.1"  # Paris -> Frankfurt
    assert answer("175.16.199.1") == "203.0.113.1"  # Tokyo -> Singapore
    assert answer("10.9.1.1") == "198.51.100.1"  # Chicago -> Ashburn
    assert plan.explain(*ip("175.16.199.1"))[0] == (
        "geo: nearest site ap (5316 km from the client's coordinates) -> 203.0.113.1"
    )


def test_an_asn_database_adds_the_clients_autonomous_system(tmp_path: Path, city_db: str) -> None:
    asn_db = write_mmdb(
        tmp_path / "asn.mmdb",
        {"81.2.69.0/24": {"autonomous_system_number": 64500, "autonomous_system_organization": "Example"}},
    )
    topology = Topology(networks=(net("10.1.0.0/16", "us"),), geoip_database=city_db, asn_database=asn_db)
    locator = TopologyLocator(topology, SITES)
    paris = locator.locate(*ip("81.2.69.160"))
    assert (paris.country, paris.continent, paris.asn) == ("FR", "EU", 64500)
    assert paris.how.endswith(", asn 64500")
    assert locator.locate(*ip("10.1.0.1")).asn is None  # no ASN record for it
    only_asn = TopologyLocator(Topology(asn_database=asn_db), SITES).locate(*ip("81.2.69.1"))
    assert (only_asn.asn, only_asn.how) == (64500, "asn 64500")
