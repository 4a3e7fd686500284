"""GeoIP clients outside the topology networks, pools whose rules test the address, and the ECS scope:
Python places such a client once (per plan C nests: the pools, a pool's geo plan, each shed level), the
C table keeps its class and scope per client prefix (wire/_geocache.c) and answers the next queries from
that prefix with the bytes Python writes; every path echoes the scope the plan used (policy/scope.py,
RFC 7871 7.2.1)."""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import dns.edns
import dns.message
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mmdb_writer import MMDBWriter
from netaddr import IPSet
from pools_world import SHED, shed_figures
from test_ctable import NETWORKS, SITES
from wire_support import CONFIG, ORIGIN, SERVICES, FixedDraw, make_snapshot, oracle, query, svc

from gslbd.answer import View, build_view
from gslbd.model.load import LoadState
from gslbd.model.service import EndpointKey, Pool, Rule
from gslbd.model.topology import Topology
from gslbd.policy.base import PolicyEnv
from gslbd.policy.locate import TopologyLocator
from gslbd.types import PolicyName
from gslbd.wire import Responder, compile_table
from gslbd.wire import ctable as ct
from gslbd.wire.slowpath import slow_response

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

PARIS = {"location": {"latitude": 48.85, "longitude": 2.35}, "country": {"iso_code": "FR"}}
TOKYO = {"location": {"latitude": 35.68, "longitude": 139.69}, "country": {"iso_code": "JP"}}
CHICAGO = {"location": {"latitude": 41.88, "longitude": -87.63}, "country": {"iso_code": "US"}}
# (client, what the GeoIP database says): Paris -> eu (.51), Tokyo -> ap (.53), Chicago -> us (.52)
RECORDS = {
    "81.2.69.0/24": PARIS,
    "175.16.199.0/24": TOKYO,
    "203.0.113.128/26": CHICAGO,
    "2001:db8:5::/48": TOKYO,
}
EU, US, AP = b"\xc0\x00\x02\x33", b"\xc0\x00\x02\x34", b"\xc0\x00\x02\x35"


@pytest.fixture(scope="module")
def city_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("geoip") / "city.mmdb"
    writer = MMDBWriter(ip_version=6, database_type="GeoLite2-City", ipv4_compatible=True)
    for cidr, record in RECORDS.items():
        net = ipaddress.ip_network(cidr)
        text = f"::{net.network_address}/{96 + net.prefixlen}" if net.version == 4 else cidr
        writer.insert_network(IPSet([text]), record)
    writer.to_db_file(str(path))
    return str(path)


def geoip_view(db: str, *extra: Any, loads: Mapping[EndpointKey, LoadState] | None = None) -> View:
    """The wire world plus a geo service over eu, us and ap; topology networks, then the GeoIP database;
    `loads`: load figures (shed_load)."""
    geo = svc("g3", "192.0.2.51", "192.0.2.52", "192.0.2.53", "2001:db8::51", policy=PolicyName.GEO)
    sites = ("eu", "us", "ap", "eu")
    placed = replace(
        geo, endpoints=tuple(replace(e, site=s) for e, s in zip(geo.endpoints, sites, strict=True))
    )
    config = replace(CONFIG, services=(*SERVICES, placed, *extra))
    locator = TopologyLocator(Topology(networks=NETWORKS, geoip_database=db), SITES)
    snapshot = make_snapshot()
    if loads:
        snapshot = replace(snapshot, loads={**snapshot.loads, **loads})
    return build_view(config, snapshot, PolicyEnv(locator, SITES, random.Random(1)))


def v4(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def ecs_scope(wire: bytes | None) -> int:
    assert wire is not None
    (option,) = [o for o in dns.message.from_wire(wire).options if isinstance(o, dns.edns.ECSOption)]
    return int(option.scopelen)


def counts() -> dict[str, int]:
    return ct.geo_counts()


def delta(before: dict[str, int]) -> dict[str, int]:
    after = counts()
    return {k: after[k] - before[k] for k in after}


def test_a_geoip_client_goes_to_python_once_then_c_answers_its_prefix_with_pythons_bytes(
    city_db: str,
) -> None:
    view = geoip_view(city_db)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    responder = Responder(table, view, random.Random(1), native=True)
    native = responder.native
    assert native is not None
    wire = query(f"g3.{ORIGIN}", edns=0)
    paris = v4("81.2.69.7")
    assert native.native.answer(wire, paris, False, False) is None  # nobody has placed it yet
    before = counts()
    first = responder.handle(wire, paris, False)  # Python answers and fills the cache
    assert first is not None and EU in first
    assert delta(before) == {"hit": 0, "miss": 1, "fill": 1}
    before = counts()
    for host in ("81.2.69.7", "81.2.69.200", "81.2.69.1"):  # the same /24: C, no Python
        out = native.native.answer(wire, v4(host), False, False)
        assert out is not None and EU in out
        assert out == oracle(view, table, wire, v4(host))
    assert delta(before) == {"hit": 3, "miss": 0, "fill": 0}
    assert set(responder.geo_cache_counts()) == {"geo_cache_hits", "geo_cache_misses", "geo_cache_fills"}
    assert native.native.answer(wire, v4("175.16.199.9"), False, False) is None  # another prefix: Python
    assert AP in (responder.handle(wire, v4("175.16.199.9"), False) or b"")


def test_a_record_narrower_than_a_24_is_kept_per_address(city_db: str) -> None:
    """203.0.113.128/26 is Chicago: the rest of its /24 is not, so C keeps each address apart."""
    view = geoip_view(city_db)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    responder = Responder(table, view, random.Random(1), native=True)
    assert responder.native is not None
    answer = responder.native.native.answer
    wire = query(f"g3.{ORIGIN}", edns=0, ecs="203.0.113.130/32")
    assert US in (responder.handle(wire, 1, False) or b"")
    assert ecs_scope(answer(wire, 1, False, False)) == 26  # the record's network, from C
    other = query(f"g3.{ORIGIN}", edns=0, ecs="203.0.113.5/32")
    assert answer(other, 1, False, False) is None  # not that record: Python places it
    placed = responder.handle(other, 1, False)
    assert placed is not None and placed[6:8] == b"\x00\x03"  # unknown there: every candidate
    assert answer(other, 1, False, False) is not None  # and C has it now


def test_the_cache_starts_empty_for_a_new_locator(city_db: str) -> None:
    view = geoip_view(city_db)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    responder = Responder(table, view, random.Random(1), native=True)
    wire = query(f"g3.{ORIGIN}", edns=0)
    responder.handle(wire, v4("81.2.69.7"), False)
    again = geoip_view(city_db)  # a reload: another locator, a full build
    responder.swap(compile_table(again, max_udp_payload=1232, use_client_subnet=True), again)
    assert responder.native is not None
    assert responder.native.native.answer(wire, v4("81.2.69.7"), False, False) is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    client=st.sampled_from(
        [
            "81.2.69.0/24",
            "81.2.69.77/32",
            "175.16.199.0/24",
            "203.0.113.160/28",
            "203.0.113.0/24",
            "8.8.8.0/24",
            "10.1.2.0/24",
            "10.1.7.0/24",
            "10.200.0.0/16",
            "2001:db8:5::/56",
            "2001:db9::/48",
            "2001:db8:1::/48",
            None,
        ]
    ),
    name=st.sampled_from(["g3", "gp", "gpg", "gps", "gpsh", "sticky", "app"]),
    repeats=st.integers(1, 3),
    use_client_subnet=st.booleans(),
)
def test_c_answers_geoip_and_pools_clients_with_the_bytes_and_scope_of_the_slow_path(
    city_db: str, client: str | None, name: str, repeats: int, use_client_subnet: bool
) -> None:
    view = _world(city_db)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=use_client_subnet)
    responder = Responder(table, view, random.Random(1), native=True)
    native = responder.native
    assert native is not None
    wire = query(f"{name}.{ORIGIN}", edns=0, ecs=client)
    source = v4("81.2.69.3")
    for _ in range(PLACEMENTS):  # places the client once per plan that only Python can place it in
        responder.handle(wire, source, False)
        if native.native.answer(wire, source, False, False, 0, 0.5) is not None:
            break
    for seq in range(repeats):
        python = oracle(view, table, wire, source, seq=seq, rng=FixedDraw(0.5))
        assert python is not None
        assert native.native.answer(wire, source, False, False, seq, 0.5) == python


_WORLDS: dict[str, View] = {}
# a pools plan, its levels with shed_load, the geo plan of the pool: each places a GeoIP client once
PLACEMENTS = 8


def _world(db: str) -> View:
    """The GeoIP world with pools services whose rules test a network and a country (built once): gp
    round_robin in each pool, gpg geo (GeoIP clients located again inside pool rest), gps geo with
    shed_load and gpsh hash with shed_load (shed levels that are pools plans)."""
    if db not in _WORLDS:
        pools = (Pool("europe", sites=("eu",), fallback="rest"), Pool("rest", sites=("us", "ap")))
        rules = (
            Rule("europe", networks=(ipaddress.ip_network("10.1.0.0/16"),)),
            Rule("europe", countries=("FR",)),
            Rule("rest"),
        )
        services = []
        for label, policy, shed, first in (
            ("gp", PolicyName.ROUND_ROBIN, False, 61),
            ("gpg", PolicyName.GEO, False, 81),
            ("gps", PolicyName.GEO, True, 91),
            ("gpsh", PolicyName.HASH, True, 101),
        ):
            addresses = tuple(f"192.0.2.{first + i}" for i in range(6))
            service = svc(label, *addresses, policy=policy)
            sites = ("eu", "us", "ap", "eu", "us", "ap")
            placed = tuple(replace(e, site=s) for e, s in zip(service.endpoints, sites, strict=False))
            if label == "gp":  # the three first only
                placed = placed[:3]
            services.append(
                replace(
                    service,
                    endpoints=placed,
                    pools=pools,
                    rules=rules,
                    shed_load=SHED if shed else None,
                )
            )
        loads = {k: v for s in services if s.shed_load is not None for k, v in shed_figures(s).items()}
        _WORLDS[db] = geoip_view(db, *services, loads=loads)
    return _WORLDS[db]


@pytest.mark.parametrize(
    ("name", "ecs", "scope"),
    [
        ("g3", "10.1.2.0/24", 24),  # the topology network 10.1.2.0/24 places it
        ("g3", "10.1.0.0/16", 16),  # capped at the source prefix
        ("g3", "10.1.5.0/24", 22),  # 10.1.0.0/16, but 10.1.2.0/24 and 10.1.3.0/24 differ from bit 22
        ("g3", "10.1.200.0/24", 17),  # 10.1.0.0/16, the nested networks differ from bit 17
        ("g3", "10.200.0.0/16", 9),  # 10.0.0.0/8; 10.1.0.0/16 differs from bit 9
        ("g3", "81.2.69.0/24", 24),  # outside: the GeoIP record's network
        ("g3", "203.0.113.128/32", 26),
        ("gp", "10.1.9.0/24", 16),  # a networks rule: that network
        ("gp", "81.2.69.0/24", 24),  # a countries rule: the GeoIP record's network
        ("sticky", "10.1.9.0/24", 24),  # policy: hash, the /24 it hashes
        ("sticky", "10.1.0.0/16", 16),
        ("app", "10.1.9.0/24", 0),  # independent of the client
    ],
)
def test_the_ecs_scope_is_what_the_plan_used_on_every_path(
    city_db: str, name: str, ecs: str, scope: int
) -> None:
    view = _world(city_db)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    responder = Responder(table, view, random.Random(1), native=True)
    assert responder.native is not None
    wire = query(f"{name}.{ORIGIN}", edns=0, ecs=ecs)
    source = v4("192.0.2.200")
    slow = slow_response(
        wire,
        view,
        source,
        False,
        tcp=False,
        max_udp_payload=1232,
        use_client_subnet=True,
        rng=random.Random(1),
        seq=0,
    )
    assert ecs_scope(slow) == scope
    responder.handle(wire, source, False)  # C places it now, or has from the start
    assert ecs_scope(responder.native.native.answer(wire, source, False, False)) == scope


def test_a_geoip_client_of_a_geo_pool_is_placed_by_the_pools_then_by_the_pools_geo_plan(
    city_db: str,
) -> None:
    """gpg: Tokyo is not FR, so rule 3 sends it to pool rest (us, ap), where geo locates it again (ap):
    two prefix cache misses, each filled by Python with its own plan (the miss's path names the pool),
    then C answers the /24 with Python's bytes."""
    view = _world(city_db)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    responder = Responder(table, view, random.Random(1), native=True)
    native = responder.native
    assert native is not None
    wire = query(f"gpg.{ORIGIN}", edns=0)
    tokyo = v4("175.16.199.9")
    before = counts()
    for _ in range(2):  # C leaves it to Python, which answers and fills the plan that missed
        out = responder.handle(wire, tokyo, False)
        assert out is not None and b"\xc0\x00\x02\x53" in out  # 192.0.2.83, ap
    # the pools' class (a miss, then a hit), the pool's geo plan (a miss): each filled once
    assert delta(before) == {"hit": 1, "miss": 2, "fill": 2}
    before = counts()
    for seq, host in enumerate(("175.16.199.9", "175.16.199.200")):
        out = native.native.answer(wire, v4(host), False, False, seq, 0.5)
        assert out is not None
        assert out == oracle(view, table, wire, v4(host), seq=seq, rng=FixedDraw(0.5))
    assert delta(before) == {"hit": 4, "miss": 0, "fill": 0}
