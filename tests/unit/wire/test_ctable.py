"""The C table (wire/ctable.py, wire/_cfast.c) answers byte for byte like the dnspython slow path (the oracle)
for the same choice (query counter and random draw), leaves to Python only what it does not know, and
keeps its counters across updates."""

from __future__ import annotations

import functools
import ipaddress
import random
import shutil
import sysconfig
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pools_world import pools_services, shed_figures
from shed_world import shed_services, shed_snapshot
from test_wire_dnssec import World, signed_config, signed_services_config
from test_wire_equivalence import LABEL, PAYLOADS, QTYPES, VIEW_ID, names, random_case, sources
from test_wire_fuzz import MUTATION, SEEDS, Mutation, check_response, mutate
from test_wire_services import responder as services_responder
from wire_support import (
    CONFIG,
    INNER,
    ORIGIN,
    OTHER,
    SERVICES,
    FixedDraw,
    ask_wire,
    left_to_python,
    make_snapshot,
    make_view,
    oracle,
    query,
    svc,
    well_formed,
)

from gslbd.answer import View, build_view
from gslbd.clock import FakeClock
from gslbd.model.config import Config, DnsConfig, RrlConfig
from gslbd.model.service import Pool, Rule
from gslbd.model.topology import Locality, NetworkEntry, SiteInfo, Topology
from gslbd.policy.base import PolicyEnv
from gslbd.policy.locate import TopologyLocator, build_env
from gslbd.server.build import AnswerBuilder
from gslbd.state.snapshot import Snapshot
from gslbd.types import PolicyName, Select
from gslbd.wire import Responder, compile_table, update_table
from gslbd.wire import ctable as ct
from gslbd.wire.cguard import NativeGuard
from gslbd.wire.compile import AnswerTable, wire_key
from gslbd.wire.dnssec import CO, DenialBudget
from gslbd.wire.guard import Guard

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

SITES = {
    "eu": SiteInfo("eu", Locality("europe", "eu-1"), (50.1, 8.7)),
    "us": SiteInfo("us", Locality("america", "us-1"), (40.7, -74.0)),
    "ap": SiteInfo("ap", Locality("asia", "ap-1"), (1.3, 103.8)),
}
NETWORKS = tuple(
    NetworkEntry(ipaddress.ip_network(cidr), site, locality)
    for cidr, site, locality in (
        ("10.0.0.0/8", "us", Locality()),
        ("10.1.0.0/16", "eu", Locality()),
        ("10.1.2.0/24", "ap", Locality()),
        ("10.1.3.0/24", None, Locality("asia")),
        ("192.0.2.0/25", None, Locality("nowhere")),
        ("2001:db8:1::/48", "eu", Locality()),
        ("2001:db8::/32", "us", Locality()),
    )
)


def geo_view() -> View:
    """The wire tests' world plus geo services over three sites, located by topology networks."""
    geo = (
        svc("g3", "192.0.2.51", "192.0.2.52", "192.0.2.53", "2001:db8::51", policy=PolicyName.GEO),
        svc("gw", "192.0.2.71", "192.0.2.72", "192.0.2.73", policy=PolicyName.WEIGHTED),
    )
    sites = ("eu", "us", "ap", "eu")
    placed = tuple(
        replace(s, endpoints=tuple(replace(e, site=sites[i % 4]) for i, e in enumerate(s.endpoints)))
        for s in geo
    )
    config = replace(CONFIG, services=(*SERVICES, *placed))
    env = PolicyEnv(TopologyLocator(Topology(networks=NETWORKS), SITES), SITES, random.Random(1))
    return build_view(config, make_snapshot(), env)


def shed_view() -> View:
    """The wire tests' world plus shed_load services over every policy (tests/unit/wire/shed_world.py),
    located by topology networks."""
    shed = shed_services(ORIGIN)
    config = replace(CONFIG, services=(*SERVICES, *shed))
    env = PolicyEnv(TopologyLocator(Topology(networks=NETWORKS), SITES), SITES, random.Random(1))
    return build_view(config, shed_snapshot(shed), env)


def pools_view() -> View:
    """The wire tests' world plus pools whose plans draw, hash or are geo, with and without shed_load
    (tests/unit/wire/pools_world.py), located by topology networks."""
    pools = pools_services()
    config = replace(CONFIG, services=(*SERVICES, *pools))
    env = PolicyEnv(TopologyLocator(Topology(networks=NETWORKS), SITES), SITES, random.Random(1))
    snapshot = make_snapshot()
    loads = {k: v for s in pools if s.shed_load is not None for k, v in shed_figures(s).items()}
    return build_view(config, replace(snapshot, loads={**snapshot.loads, **loads}), env)


# The wire tests' world (chains, EDE, a SOA whose MNAME lies in the zone), with topology, with
# dns.identity (NSID), the services world (HTTPS, SRV, a wildcard service), shed_load on every policy
# and pools whose plans draw.
VIEWS = {
    "plain": make_view(),
    "geo": geo_view(),
    "identity": VIEW_ID,
    "wild": services_responder().view,
    "shed": shed_view(),
    "pools": pools_view(),
}


def with_co(wire: bytes) -> bytes:
    """`wire` (ending with an OPT record without options) with the CO flag (RFC 9824) set."""
    return wire[:-4] + bytes((wire[-4] | 0x40,)) + wire[-3:]


def ecs_options() -> st.SearchStrategy[str | None]:
    v4 = st.sampled_from(
        ["10.1.2.0/24", "10.1.3.0/24", "10.1.0.0/16", "10.9.0.0/16", "192.0.2.0/25", "0.0.0.0/0"]
    )
    v6 = st.sampled_from(["2001:db8:1::/48", "2001:db8:2::/48", "2001:db9::/32", "::/0"])
    return st.one_of(st.none(), v4, v6)


def test_the_extension_is_built_where_a_compiler_exists() -> None:
    """setup.py builds it optionally (-Werror): a warning must fail here rather than pass unnoticed."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip("no C compiler")
    assert ct.AVAILABLE


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_the_c_table_gives_the_slow_paths_bytes_for_the_same_choice(data: st.DataObject) -> None:
    view_key = data.draw(st.sampled_from(sorted(VIEWS)), "view")
    view = VIEWS[view_key]
    pool = sorted(view.names)
    below = st.tuples(st.lists(LABEL, min_size=1, max_size=2), st.sampled_from(pool)).map(
        lambda t: ".".join(t[0]) + "." + t[1]
    )
    name = data.draw(st.one_of(st.sampled_from(pool), below, names()), "name")
    name = random_case(name, random.Random(data.draw(st.integers(0, 1000), "case")))
    if sum(len(label) + 1 for label in name.split(".") if label) + 1 > 255:
        name = name[name.index(".") + 1 :]
    edns = data.draw(st.sampled_from([None, 0]), "edns")
    cookie = edns is not None and data.draw(st.booleans(), "cookie")
    nsid = edns is not None and data.draw(st.booleans(), "nsid")
    options: tuple[dns.edns.Option, ...] = (dns.edns.CookieOption(b"cookie!!", b""),) if cookie else ()
    options += (dns.edns.NSIDOption(b""),) if nsid else ()
    wire = query(
        name,
        data.draw(st.sampled_from(QTYPES), "rtype"),
        edns=edns,
        payload=data.draw(PAYLOADS, "payload"),
        ecs=data.draw(ecs_options(), "ecs") if edns is not None else None,
        options=options,
        rd=data.draw(st.booleans(), "rd"),
        cd=data.draw(st.booleans(), "cd"),
        dnssec_ok=edns is not None and data.draw(st.booleans(), "do"),
        qid=data.draw(st.integers(0, 65535), "id"),
    )
    table, native = tables(
        view_key,
        data.draw(st.sampled_from([512, 600, 700, 1232, 4096]), "max_udp_payload"),
        data.draw(st.booleans(), "use_client_subnet"),
    )
    tcp = data.draw(st.booleans(), "tcp")
    ip, v6 = data.draw(
        st.one_of(
            sources(),
            st.sampled_from([(0x0A010203, False), (0x0A010305, False), (0x0A050505, False)]),
        ),
        "source",
    )
    for _ in range(data.draw(st.integers(1, 4), "repeats")):
        draw = data.draw(st.floats(0.0, 1.0, exclude_max=True), "draw")
        seq = data.draw(st.integers(0, 1000), "seq")
        python = oracle(VIEWS[view_key], table, wire, ip, v6, tcp, seq=seq, rng=FixedDraw(draw))
        c = native.native.answer(wire, ip, v6, tcp, seq, draw)
        # NSID written by C too; None: what C leaves to Python by design (below a wildcard's parent...)
        assert c == python or (c is None and left_to_python(table, wire))


@functools.cache
def tables(view_key: str, max_udp_payload: int, use_client_subnet: bool) -> tuple[AnswerTable, ct.CTable]:
    """A table and its C copy per world and settings, shared by the examples (the choice is given to
    both, so the counters need not start at zero)."""
    table = compile_table(
        VIEWS[view_key], max_udp_payload=max_udp_payload, use_client_subnet=use_client_subnet
    )
    return table, ct.build_ctable(table)


@settings(max_examples=500, deadline=None)
@given(
    seed=st.integers(0, len(SEEDS) - 1),
    ops=st.lists(MUTATION, min_size=1, max_size=5),
    tcp=st.booleans(),
    use_client_subnet=st.booleans(),
    draw=st.floats(0.0, 1.0, exclude_max=True),
)
@example(
    seed=3, ops=[("set", 1712, 3, b"\x00")], tcp=False, use_client_subnet=False, draw=0.0
)  # a cookie made NSID
def test_mutated_queries_get_the_python_answer_or_go_to_python(
    seed: int, ops: list[Mutation], tcp: bool, use_client_subnet: bool, draw: float
) -> None:
    packet = mutate(SEEDS[seed], ops)
    table = compile_table(VIEWS["plain"], max_udp_payload=1232, use_client_subnet=use_client_subnet)
    python = oracle(VIEWS["plain"], table, packet, 0x0A000001, False, tcp, rng=FixedDraw(draw))
    c = ct.build_ctable(table).native.answer(packet, 0x0A000001, False, tcp, 0, draw)
    # None from C: what C leaves to Python by design, or a shape only Python answers (a message
    # that does not parse, another opcode, class or version, more records, unusual options)
    assert c == python or (c is None and (not well_formed(packet) or left_to_python(table, packet)))


@settings(max_examples=300, deadline=None)
@given(packet=st.binary(max_size=600), tcp=st.booleans())
def test_random_packets_never_crash_the_c_table(packet: bytes, tcp: bool) -> None:
    native = ct.build_ctable(compile_table(VIEWS["geo"], max_udp_payload=1232, use_client_subnet=True))
    out = native.native.answer(packet, 0x0A010203, False, tcp)
    if out is not None:  # an answer C gives is a response to this packet
        check_response(packet, out)


def test_geo_clients_are_placed_by_the_longest_topology_prefix() -> None:
    wire = query(f"g3.{ORIGIN}", edns=0)
    placed = {
        0x0A010203: b"\xc0\x00\x02\x35",
        0x0A010101: b"\xc0\x00\x02\x33",
        0x0A020202: b"\xc0\x00\x02\x34",
    }
    for ip in (*placed, 0x0A010305, 0xC0000201, 0x08080808):
        table = compile_table(VIEWS["geo"], max_udp_payload=1232, use_client_subnet=True)
        native = ct.build_ctable(table).native
        for seq in range(3):  # C's query counter advances as the count given to the slow path
            out = native.answer(wire, ip, False, False)
            assert out is not None
            assert out == oracle(VIEWS["geo"], table, wire, ip, seq=seq)
            if ip in placed:
                assert placed[ip] in out and out.count(b"\x00\x01\x00\x01\x00\x00\x00\x14\x00\x04") == 1


@pytest.mark.parametrize(
    ("fallback", "wire"),
    [
        (ct.Fallback(everything=True), query(f"app.{ORIGIN}")),
        (ct.Fallback(negative=True), query(f"_gslbd-exchange-eu.{ORIGIN}")),
        (ct.Fallback(negative=True), query(f"x._GSLBD-Exchange-us.{ORIGIN}", "SOA")),
        (ct.Fallback(negative=True), query("_gslbd-exchange-eu.example.net.")),
        (ct.Fallback(negative=True), query(f"_gslbd-exchange-eu.{ORIGIN}", "AXFR")),
    ],
)
def test_features_in_python_send_their_queries_to_python(fallback: ct.Fallback, wire: bytes) -> None:
    table = compile_table(VIEWS["plain"], max_udp_payload=1232, use_client_subnet=True)
    assert ct.build_ctable(table).native.answer(wire, 1, False, False) is not None
    assert ct.build_ctable(table, fallback).native.answer(wire, 1, False, False) is None


@pytest.mark.parametrize(
    "wire",
    [
        query(f"nope.{ORIGIN}"),
        query("outside.example.net."),
        query(f"app.{ORIGIN}", "AXFR"),
        query(f"solo.{ORIGIN}", "AAAA"),
    ],
    ids=["nxdomain", "refused", "transfer", "nodata"],
)
def test_negative_answers_stay_in_c_with_the_exchange_hook_unless_they_name_an_exchange_zone(
    wire: bytes,
) -> None:
    """The exchange hook answers only queries naming `_gslbd-exchange-*` (exchange/xfrserve.py): every other
    NXDOMAIN, REFUSED or NODATA is the table's, in C, byte for byte as without the hook."""
    table = compile_table(VIEWS["plain"], max_udp_payload=1232, use_client_subnet=True)
    plain = ct.build_ctable(table).native.answer(wire, 1, False, False)
    assert plain is not None
    assert ct.build_ctable(table, ct.Fallback(negative=True)).native.answer(wire, 1, False, False) == plain


def test_what_c_leaves_to_python_changes_with_an_update_and_no_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A partial table's C copy leaves names it lacks to Python (`misses`); the update that makes the
    table whole clears that in the same step, copying only the names that changed."""
    view = VIEWS["plain"]
    app = wire_key(f"app.{ORIGIN}")
    whole = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    partial = replace(whole, names=whole.names.evolve((), [app]), partial=True)
    c = ct.build_ctable(partial, ct.Fallback(misses=True))
    assert c.native.answer(query(f"app.{ORIGIN}"), 1, False, False) is None  # not held: Python's
    assert c.native.answer(query(f"nope.{ORIGIN}"), 1, False, False) is None  # maybe not compiled yet
    filled = update_table(partial, view, [f"app.{ORIGIN}"], [], partial=False)

    def no_copy(*args: object) -> ct.CTable:
        raise AssertionError("the whole table was copied again")

    monkeypatch.setattr(ct, "build_ctable", no_copy)
    updated = ct.update_ctable(c, filled, ct.Fallback())
    assert updated.native.names() == c.native.names() + 1
    assert updated.native.answer(query(f"app.{ORIGIN}"), 1, False, False) is not None
    nxdomain = updated.native.answer(query(f"nope.{ORIGIN}"), 1, False, False)
    assert nxdomain is not None and dns.message.from_wire(nxdomain).rcode() == dns.rcode.NXDOMAIN
    assert c.native.answer(query(f"nope.{ORIGIN}"), 1, False, False) is None  # the old copy is as it was


def test_an_update_replaces_only_changed_names_and_keeps_counting() -> None:
    view = VIEWS["plain"]
    responder = Responder(
        compile_table(view, max_udp_payload=1232, use_client_subnet=True), view, random.Random(1), native=True
    )
    assert responder.native is not None
    for _ in range(5):
        ask_wire(responder, query(f"app.{ORIGIN}"))
    ask_wire(responder, query(f"split.{ORIGIN}"))
    health = dict(make_snapshot().health)
    app = next(s for s in SERVICES if s.label == "app")
    health[app.endpoints[0].key] = False
    new_view = make_view(snapshot=replace(make_snapshot(), health=health))
    new_table = update_table(responder.table, new_view, [app.name], [])
    old_native = responder.native.native
    responder.swap(new_table, new_view)
    assert responder.native is not None and responder.native.native is not old_native
    del old_native  # a replaced name's counts move to the totals when no table holds it any more
    out = ask_wire(responder, query(f"app.{ORIGIN}"))
    assert out is not None and b"\xc0\x00\x02\x01" not in out  # 192.0.2.1 is down now
    counts = responder.policy_answers()
    assert counts["round_robin"] == 6
    assert counts["weighted"] == 1
    assert responder.slow_count == 0


def _built_and_updated(
    table: AnswerTable, native: ct.CTable, wire: bytes
) -> tuple[bytes | None, bytes | None]:
    """The answer of a C table built whole from `table` and the updated C copy's, for the same choice
    (these tables are edited by name, so no view answers them: the slow path is held to C elsewhere)."""
    built = ct.build_ctable(table).native.answer(wire, 0x0A000001, False, False, 3, 0.5)
    return built, native.native.answer(wire, 0x0A000001, False, False, 3, 0.5)


def layout_entries(table: AnswerTable) -> int:
    """The entries the C copy of `table` holds, as `Table.layout()` counts them: one per distinct fixed
    answer's bytes (shared by the names), one per plan's entry of a name (its counter is the name's), and
    the entries a plan's entry holds: a shed entry's levels, a drawing pools entry's classes."""
    fixed: set[object] = set()
    planned = 0
    for node in table.names.values():
        distinct = {id(e): e for e in (*node.types.values(), node.default)}.values()
        fixed.update(e.variants for e in distinct if e.pick is None)
        planned += sum(1 + held_entries(ct._entry_spec(e, 0, ct._Locators())) for e in distinct if e.pick)
    return len(fixed) + planned


def held_entries(spec: tuple[Any, ...]) -> int:
    """The entries inside the C entry of `spec` (wire/_shed.c levels, wire/_pools.c classes)."""
    kind, param = spec[0], spec[4]
    if kind == ct.K_SHED:
        inner = param[1]
    elif kind == ct.K_GEO and len(param) == 5:  # (locator, starts, counts, class_of, inner): drawing pools
        inner = param[4]
    else:
        return 0
    return sum(1 + held_entries(level) for level in inner)


def test_names_that_share_a_fixed_entry_answer_right_after_one_is_removed_or_updated() -> None:
    """The compiler shares fixed entries (NODATA, the SOA...) between names; C holds one entry for them,
    whose last holder frees it. Removing one holder and updating another leaves the others' answers."""
    table, _ = _many_names(2, "xa{}")  # two more names holding app's node
    txt = 16
    names = ("app", "big", "xa0", "xa1")  # names of one label length: one NODATA
    nodes = [table.names[wire_key(f"{label}.{ORIGIN}")] for label in names]
    assert len({id(n.types.get(txt, n.default)) for n in nodes}) == 1
    native = ct.build_ctable(table)
    assert native.native.layout()[4] == layout_entries(table)  # one C entry per fixed answer's bytes
    before = {
        label: native.native.answer(query(f"{label}.{ORIGIN}", "TXT"), 1, False, False) for label in names
    }
    big = next(s for s in SERVICES if s.label == "big")
    health = {**make_snapshot().health, big.endpoints[0].key: False}
    changed = update_table(table, make_view(snapshot=replace(make_snapshot(), health=health)), [big.name], [])
    changed = replace(changed, names=changed.names.evolve((), [wire_key(f"app.{ORIGIN}")]))
    updated = ct.update_ctable(native, changed)
    assert updated.native.names() == native.native.names() - 1
    del native  # the removed name's node and big's old one are freed now, with their entry references
    gone = updated.native.answer(query(f"app.{ORIGIN}", "TXT"), 1, False, False)
    assert gone is not None and dns.message.from_wire(gone).rcode() == dns.rcode.NXDOMAIN
    for label in names[1:]:
        wire = query(f"{label}.{ORIGIN}", "TXT")
        assert updated.native.answer(wire, 1, False, False) == before[label]
        python, c = _built_and_updated(changed, updated, wire)
        assert c == python
        python, c = _built_and_updated(changed, updated, query(f"{label}.{ORIGIN}"))
        assert c == python


def _many_names(count: int, label: str = "n{}") -> tuple[AnswerTable, list[bytes]]:
    """The plain table with `count` more names, each holding the node of app (round robin)."""
    table = compile_table(VIEWS["plain"], max_udp_payload=1232, use_client_subnet=True)
    app = table.names[wire_key(f"app.{ORIGIN}")]
    keys = [wire_key(f"{label.format(i)}.{ORIGIN}") for i in range(count)]
    return replace(table, names=table.names.evolve({key: app for key in keys})), keys


def test_an_update_of_one_name_copies_only_the_index_shard_that_holds_it() -> None:
    table, keys = _many_names(3000)
    native = ct.build_ctable(table)
    names, shards, *_ = native.native.layout()
    assert names == len(table.names) and shards > 8
    solo = table.names[wire_key(f"solo.{ORIGIN}")]
    changed = replace(table, names=table.names.evolve({keys[7]: solo}))
    updated = ct.update_ctable(native, changed)
    assert updated.native.shared_shards(native.native) == shards - 1
    assert updated.native.names() == names
    wire = query(f"n7.{ORIGIN}")
    python, c = _built_and_updated(changed, updated, wire)
    assert c == python and c != native.native.answer(wire, 1, False, False, 0)
    removed = ct.update_ctable(updated, replace(changed, names=changed.names.evolve((), [keys[8]])))
    assert removed.native.shared_shards(updated.native) == shards - 1
    assert removed.native.names() == names - 1
    nxdomain = removed.native.answer(query(f"n8.{ORIGIN}"), 1, False, False)
    assert nxdomain is not None and dns.message.from_wire(nxdomain).rcode() == dns.rcode.NXDOMAIN
    for i in (0, 9, 2999):  # the names around them still answer (the shard's probe chains were mended)
        python, c = _built_and_updated(table, removed, query(f"n{i}.{ORIGIN}"))
        assert c == python


def test_every_name_is_found_after_many_removals_and_additions_in_one_shard() -> None:
    """Removals from a shard shift the names after them back (linear probing without tombstones)."""
    table, keys = _many_names(400)
    native = ct.build_ctable(table)
    rng = random.Random(5)
    present = set(keys)
    current = table
    for _ in range(30):
        gone = rng.sample(sorted(present), 10)
        back = rng.sample(sorted(set(keys) - present), min(5, len(set(keys) - present)))
        app = table.names[wire_key(f"app.{ORIGIN}")]
        current = replace(current, names=current.names.evolve({key: app for key in back}, gone))
        native = ct.update_ctable(native, current)
        present = (present - set(gone)) | set(back)
    assert native.native.names() == len(current.names)
    for i, key in enumerate(keys):
        answer = native.native.answer(query(f"n{i}.{ORIGIN}"), 1, False, False, 0)
        assert answer is not None
        assert (dns.message.from_wire(answer).rcode() == dns.rcode.NOERROR) == (key in present)


def test_a_table_filled_in_steps_is_resharded_as_it_grows_and_finds_every_name() -> None:
    """A table that grows past four times what its shards were sized for is resharded whole (a partial
    table filled in steps); shards grow when half full in between."""
    table, keys = _many_names(3000)
    app = table.names[wire_key(f"app.{ORIGIN}")]
    current = replace(table, names=table.names.evolve((), keys))
    native = ct.build_ctable(current)
    shard_counts = {native.native.layout()[1]}
    for start in range(0, len(keys), 250):
        gone = [keys[start - 1]] if start else []  # a removal in the same update
        current = replace(
            current, names=current.names.evolve({k: app for k in keys[start : start + 250]}, gone)
        )
        native = ct.update_ctable(native, current)
        shard_counts.add(native.native.layout()[1])
    assert len(shard_counts) >= 3  # 1 shard, then more twice
    assert native.native.names() == len(current.names)
    for i, key in enumerate(keys):
        answer = native.native.answer(query(f"n{i}.{ORIGIN}"), 1, False, False, 0)
        assert answer is not None
        assert (dns.message.from_wire(answer).rcode() == dns.rcode.NOERROR) == (key in current.names)


def test_names_that_hold_the_same_rotation_count_their_own_answers_in_c() -> None:
    """Only fixed entries are shared in C: a plan's entry keeps its counter per name."""
    table, _ = _many_names(2)
    native = ct.build_ctable(table)

    def first_address(label: str) -> bytes:
        answer = native.native.answer(query(f"{label}.{ORIGIN}"), 1, False, False)
        assert answer is not None
        return dns.message.from_wire(answer).answer[0][0].to_wire()

    first = first_address("n0")
    assert first_address("n0") != first  # the rotation moved on at n0
    assert first_address("n1") == first  # and not at n1


def test_the_responder_without_c_answers_the_same() -> None:
    view = VIEWS["plain"]
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    with_c = Responder(table, view, random.Random(1), native=True)
    table2 = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    without = Responder(table2, view, random.Random(1), native=False)
    assert without.native is None and without.slot is None
    for label in ("app", "solo", "nope", "primary", "sticky"):
        wire = query(f"{label}.{ORIGIN}", edns=0)
        assert ask_wire(with_c, wire) == ask_wire(without, wire)


def test_a_zone_whose_soa_c_cannot_write_leaves_its_nxdomain_to_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = compile_table(VIEWS["plain"], max_udp_payload=1232, use_client_subnet=True)
    monkeypatch.setattr(ct, "_soa_parts", lambda zone: None)
    native = ct.build_ctable(table).native
    assert native.answer(query(f"nope.{ORIGIN}"), 1, False, False) is None
    assert native.answer(query(f"app.{ORIGIN}"), 1, False, False) is not None


def test_a_table_that_cannot_be_copied_into_c_is_answered_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    view = VIEWS["plain"]
    responder = Responder(
        compile_table(view, max_udp_payload=1232, use_client_subnet=True), view, random.Random(1), native=True
    )
    assert responder.native is not None

    def broken(*args: object) -> None:
        raise ValueError("broken")

    monkeypatch.setattr(ct, "update_ctable", broken)
    responder.swap(compile_table(view, max_udp_payload=1232, use_client_subnet=True), view)
    assert responder.native is None  # and the slot is empty: the UDP loops ask Python too
    assert ask_wire(responder, query(f"app.{ORIGIN}")) is not None
    monkeypatch.undo()
    responder.swap(compile_table(view, max_udp_payload=1232, use_client_subnet=True), view)
    assert responder.native is not None


@pytest.mark.parametrize(
    "name",
    [
        f"nope.{ORIGIN}",
        f"A.b.C.{ORIGIN}",
        f"x.ns1.{ORIGIN}",  # below the SOA's MNAME: its name compresses against the query's
        f"Y.X.NS1.{ORIGIN}",
        f"x.hostmaster.{ORIGIN}",
        f"nothing.{INNER}",
        f"ns1.x.{INNER}",
        f"nope.{OTHER}",
    ],
)
@pytest.mark.parametrize("edns", [None, 0])
def test_nxdomain_soa_is_written_in_c_as_python_writes_it(name: str, edns: int | None) -> None:
    table = compile_table(VIEWS["plain"], max_udp_payload=1232, use_client_subnet=True)
    native = ct.build_ctable(table).native
    wire = query(name, edns=edns)
    c = native.answer(wire, 1, False, False)
    assert c is not None and c[3] & 0xF == 3
    assert c == oracle(VIEWS["plain"], table, wire, 1)


def test_names_below_a_wildcards_parent_go_to_python_and_other_nxdomains_do_not() -> None:
    view = VIEWS["wild"]
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    native = ct.build_ctable(table).native
    for below in ("x.apps.gslb.test.", "a.b.apps.gslb.test."):
        assert native.answer(query(below), 1, False, False) is None
    for other in ("nope.gslb.test.", "x.web.gslb.test."):  # no wildcard parent between it and the zone
        out = native.answer(query(other), 1, False, False)
        assert out is not None and out == oracle(view, table, query(other), 1)


def test_the_responder_sends_what_its_features_change_to_python() -> None:
    """RRL/cookies: nothing (C applies its guard), a Python guard everything; the exchange hook: negative
    answers naming an exchange zone; set and cleared at run time."""
    view = VIEWS["plain"]
    responder = Responder(
        compile_table(view, max_udp_payload=1232, use_client_subnet=True), view, random.Random(1), native=True
    )
    assert responder.native is not None and responder.native.fallback == ct.Fallback()
    asked: list[bytes] = []

    def hook(data: bytes, evaluated_at: float, ip: int, v6: bool, tcp: bool) -> bytes | None:
        asked.append(data)
        return None

    responder.on_exchange = hook
    assert responder.native is not None and responder.native.fallback == ct.Fallback(negative=True)
    nx, refused, found = query(f"nope.{ORIGIN}"), query("elsewhere.example.net."), query(f"app.{ORIGIN}")
    marked = query(f"_gslbd-exchange-us.{ORIGIN}", "SOA")
    assert responder.native.answer(marked, 1, False, False) is None
    for answered in (nx, refused, found):  # no exchange zone named: the table's answer, in C
        assert responder.native.answer(answered, 1, False, False) is not None
    for wire in (nx, refused, found, marked):
        ask_wire(responder, wire)
    assert asked == [marked]  # the hook sees the negative answers about exchange zones
    responder.on_exchange = None
    assert responder.native is not None and responder.native.fallback == ct.Fallback()

    rrl = RrlConfig(responses_per_second=5, errors_per_second=5, nxdomains_per_second=5, window=2.0, slip=2)
    guarded = make_view(replace(CONFIG, dns=DnsConfig(rrl=rrl)))
    responder.swap(compile_table(guarded, max_udp_payload=1232, use_client_subnet=True), guarded)
    assert isinstance(responder.guard, NativeGuard)
    assert responder.native is not None and not responder.native.fallback.everything
    assert responder.native.answer(found, 1, False, False) is not None  # C answers, and counts in the guard
    assert len(responder.guard.native) == 1
    responder.guard = Guard(rrl, None, b"\0" * 16)  # the Python oracle as the guard: C steps aside
    assert responder.native is not None and responder.native.fallback.everything
    assert responder.native.answer(found, 1, False, False) is None
    responder.guard = None
    assert responder.native is not None and not responder.native.fallback.everything


def with_denial_rate(config: Config, rate: int) -> Config:
    """`config` with `denial_signing_rate` set in its signed zones."""
    zones = tuple(
        replace(z, dnssec=replace(z.dnssec, denial_signing_rate=rate)) if z.dnssec is not None else z
        for z in config.zones
    )
    return replace(config, zones=zones)


@pytest.fixture(scope="module", params=["rate-100", "rate-0", "wildcard"])
def signed_world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[View, AnswerTable]:
    """Signed worlds on a fake clock: C never sees the default budget spent (it reads the system clock),
    so past it Python answers from the chain; with rate 0 the budget is always spent and C answers
    from the chain."""
    tmp = tmp_path_factory.mktemp("keys")
    if request.param == "wildcard":
        config = with_denial_rate(signed_services_config(tmp), 0)
        return AnswerBuilder(FakeClock()).build(config, Snapshot(), build_env(config, random.Random(1)))
    config = signed_config(tmp, 13, True)
    world = World(config if request.param == "rate-100" else with_denial_rate(config, 0))
    return world.view, world.table


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_signed_table_answers_do_queries_in_c_as_python_does(
    signed_world: World, data: st.DataObject
) -> None:
    """Positive, NODATA, DNSKEY/CDS answers with DO, compact denials signed before and NXDOMAIN from the
    NSEC chain past the budget come from C, byte for byte as the slow path writes them (DO
    echoed; with CO a compact denial is NXDOMAIN and echoes CO); without DO the unsigned ones; names
    below a wildcard's parent go to Python."""
    view, table = signed_world
    assert table.signer is not None
    responder = Responder(table, view, random.Random(1), native=False)
    fallback = responder.fallback_of(table)
    assert fallback == ct.Fallback()
    native = ct.build_ctable(table, fallback).native
    pool = sorted(view.names)
    below = st.tuples(st.lists(LABEL, min_size=1, max_size=2), st.sampled_from(pool)).map(
        lambda t: ".".join(t[0]) + "." + t[1]
    )
    name = data.draw(st.one_of(st.sampled_from(pool), below, names()), "name")
    name = random_case(name, random.Random(data.draw(st.integers(0, 1000), "case")))
    if sum(len(label) + 1 for label in name.split(".") if label) + 1 > 255:
        name = name[name.index(".") + 1 :]
    edns = data.draw(st.sampled_from([None, 0]), "edns")
    do = edns is not None and data.draw(st.booleans(), "do")
    co = edns is not None and data.draw(st.booleans(), "co")
    wire = query(
        name,
        data.draw(st.sampled_from([*QTYPES, "DNSKEY", "CDS", "NSEC", "RRSIG"]), "rtype"),
        edns=edns,
        dnssec_ok=do,
        payload=data.draw(PAYLOADS, "payload"),
        rd=data.draw(st.booleans(), "rd"),
    )
    if co:
        wire = with_co(wire)
    tcp = data.draw(st.booleans(), "tcp")
    draw = data.draw(st.floats(0.0, 1.0, exclude_max=True), "draw")
    seq = data.draw(st.integers(0, 1000), "seq")
    python = oracle(view, table, wire, 1, False, tcp, seq=seq, rng=FixedDraw(draw))  # first: it may sign
    c = native.answer(wire, 1, False, tcp, seq, draw)
    if c is None:  # C leaves to Python only what it must
        assert python is not None
        assert (
            (do and is_denial(table, wire) and python[3] & 0xF == 3 and gate_open_or_odd(table, wire))
            # a CNAME chain to a name that does not exist (dangling.): its target's fresh denial
            or (do and python[3] & 0xF == 3 and dangling(wire))
            or left_to_python(table, wire)
            or (do and dns.message.from_wire(wire).question[0].rdtype in (46, 47))  # NSEC, RRSIG: meta
        )
    else:
        assert c == python


def is_denial(table: AnswerTable, wire: bytes) -> bool:
    """Whether `wire` asks a name that the table does not hold, in a signed zone."""
    question = dns.message.from_wire(wire).question[0]
    if table.names.get(wire_key(question.name.to_text())) is not None:
        return False
    return any(question.name.is_subdomain(dns.name.from_wire(key, 0)[0]) for key in table.signed_zones)


def dangling(wire: bytes) -> bool:
    """Whether the question is the CNAME to a name that does not exist (dangling.): C leaves its
    target's denial to Python whatever the signing budget (the rate-0 case of CI's Debian pass and of
    a helper's run)."""
    return dns.message.from_wire(wire).question[0].name.labels[0].lower() == b"dangling"


def gate_open_or_odd(table: AnswerTable, wire: bytes) -> bool:
    """Whether C must leave an NXDOMAIN from the chain to Python: the budget is not spent as C sees it,
    or a label of the name holds a zero byte."""
    assert table.signer is not None
    question = dns.message.from_wire(wire).question[0]
    gates = [b.gate for b in table.signer.budgets.values()]
    return any(g is not None and not g.closed() for g in gates) or any(
        b"\0" in label for label in question.name
    )


def test_a_health_change_updates_the_signed_nodes_in_c(tmp_path: Path) -> None:
    world = World(signed_config(tmp_path, 13, True))
    world.responder = Responder(world.table, world.view, random.Random(3), native=True)
    wire = query(f"app.{ORIGIN}", "A", dnssec_ok=True)
    assert world.responder.native is not None
    assert world.responder.native.answer(wire, 1, False, False) is not None  # C answers DO queries
    old = world.responder.native.native
    app = next(s for s in SERVICES if s.label == "app")
    health = dict(make_snapshot().health)
    health[app.endpoints[0].key] = False  # 192.0.2.1 down: new signed A variants for app only
    world.rebuild(Snapshot(version=2, health=health))
    assert not world.builder.last_full and world.table.derived_from
    native = world.responder.native
    assert native is not None and native.native is not old
    out = native.answer(wire, 1, False, False)
    assert out is not None
    msg = dns.message.from_wire(out)
    assert sorted(rd.to_text() for rd in msg.answer[0]) == ["192.0.2.2", "192.0.2.3"]
    assert world.validate(msg) == 1
    assert world.responder.slow_count == 0


def test_a_name_the_c_table_misses_goes_to_python_when_misses_are_python() -> None:
    """Fallback(misses=True): lazily compiled tables. A name C does not hold is "not mine" (no NXDOMAIN or
    REFUSED from C); the names C holds are answered as before."""
    table = compile_table(VIEWS["plain"], max_udp_payload=1232, use_client_subnet=True)
    strict = ct.build_ctable(table).native
    lazy = ct.build_ctable(table, ct.Fallback(misses=True)).native
    for wire in (query(f"nope.{ORIGIN}"), query("outside.example.net."), query(f"a.b.app.{ORIGIN}", edns=0)):
        assert strict.answer(wire, 1, False, False) is not None
        assert lazy.answer(wire, 1, False, False) is None
    for wire in (query(f"app.{ORIGIN}"), query(f"app.{ORIGIN}", "AXFR"), query(ORIGIN, "SOA", edns=0)):
        found = lazy.answer(wire, 1, False, False)
        assert found is not None and found == strict.answer(wire, 1, False, False)


def test_a_compact_denial_signed_in_python_is_answered_by_c_until_the_signer_forgets_it(
    tmp_path: Path,
) -> None:
    world = World(signed_config(tmp_path, 13, True))  # the default budget: Python signs fresh denials
    table, signer = world.table, world.table.signer
    assert signer is not None
    native = ct.build_ctable(table).native
    wire = query(f"Never-Asked.{ORIGIN}", "A", edns=0, dnssec_ok=True)
    assert native.answer(wire, 1, False, False) is None  # not signed yet: Python signs it (the budget)
    python = oracle(world.view, table, wire, 1)
    made = signer.signatures_made
    c = native.answer(wire, 1, False, False)
    assert c is not None and c == python and signer.signatures_made == made
    msg = dns.message.from_wire(c)
    assert msg.rcode() == dns.rcode.NOERROR and world.validate(msg) == 2  # SOA and the NSEC
    signer.forget_due(world.clock.wall())  # the re-signing timer: every cached denial goes
    assert native.answer(wire, 1, False, False) is None


def test_past_the_budget_c_answers_nxdomain_from_the_nsec_chain(tmp_path: Path) -> None:
    world = World(with_denial_rate(signed_config(tmp_path, 13, True), 0))
    table = world.table
    assert table.signer is not None
    made = table.signer.signatures_made
    native = ct.build_ctable(table).native
    for name in (f"nope.{ORIGIN}", f"x.y.app.{ORIGIN}", f"ZZZ.{ORIGIN}", f"a.b.c.{ORIGIN}"):
        wire = query(name, "A", edns=0, dnssec_ok=True)
        c = native.answer(wire, 1, False, False)
        assert c is not None and c == oracle(world.view, table, wire, 1)
        msg = dns.message.from_wire(c)
        assert msg.rcode() == dns.rcode.NXDOMAIN and msg.ednsflags & dns.flags.DO
        assert world.validate(msg) >= 2  # the SOA and one or two NSEC links, each with its RRSIG
    assert table.signer.signatures_made == made  # nothing signed on the query path


def test_the_gate_closes_for_c_exactly_while_the_budget_is_spent() -> None:
    budget = DenialBudget(1, time.time)
    assert budget.gate is not None and not budget.gate.closed()  # a token: C asks Python, which signs
    assert budget.take()
    assert not budget.take()  # spent: C answers from the chain until the next token is due
    assert budget.gate.closed() and budget.gate.get() == budget.empty_until
    assert DenialBudget(0, FakeClock().wall).gate.closed()  # never a token
    assert not DenialBudget(5, FakeClock().wall).gate.closed()  # another clock: Python decides


def test_a_co_query_gets_the_cached_compact_denial_from_c_as_nxdomain_with_co(tmp_path: Path) -> None:
    world = World(signed_config(tmp_path, 13, True))
    native = ct.build_ctable(world.table).native
    wire = with_co(query(f"co-cached.{ORIGIN}", "A", edns=0, dnssec_ok=True))
    python = oracle(world.view, world.table, wire, 1)  # signs and caches it
    c = native.answer(wire, 1, False, False)
    assert c is not None and c == python
    msg = dns.message.from_wire(c)
    assert msg.rcode() == dns.rcode.NXDOMAIN and msg.ednsflags & CO
    assert world.validate(msg) == 2
    plain = query(f"co-cached.{ORIGIN}", "A", edns=0, dnssec_ok=True)  # DO alone: NOERROR, no CO
    out = native.answer(plain, 1, False, False)
    assert out is not None and dns.message.from_wire(out).rcode() == dns.rcode.NOERROR


def biased_geo_view(bias: tuple[tuple[str, int], ...]) -> View:
    """A geo service at eu (.51) and ap (.53) only: a client of the us site goes to the nearest of them."""
    service = svc("gb", "192.0.2.51", "192.0.2.53", policy=PolicyName.GEO, bias=bias)
    placed = replace(
        service,
        endpoints=(replace(service.endpoints[0], site="eu"), replace(service.endpoints[1], site="ap")),
    )
    env = PolicyEnv(TopologyLocator(Topology(networks=NETWORKS), SITES), SITES, random.Random(1))
    return build_view(replace(CONFIG, services=(*SERVICES, placed)), make_snapshot(), env)


@pytest.mark.parametrize(
    ("bias", "expected"),
    [
        ((), b"\xc0\x00\x02\x33"),
        ((("ap", 70),), b"\xc0\x00\x02\x35"),
        ((("eu", -50), ("ap", 50)), b"\xc0\x00\x02\x35"),
    ],
    ids=["nearest", "ap-grown", "eu-shrunk-ap-grown"],
)
def test_the_c_table_answers_the_biased_nearest_site(
    bias: tuple[tuple[str, int], ...], expected: bytes
) -> None:
    # From New York (the us site): eu 6200 km, ap 15300 km; ap * 0.3 (4590), or eu * 1.5 (9300) against
    # ap * 0.5 (7650), put ap nearer.
    wire = query(f"gb.{ORIGIN}", edns=0)
    view = biased_geo_view(bias)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    out = ct.build_ctable(table).native.answer(wire, 0x0A090909, False, False)
    assert out is not None
    assert out == oracle(view, table, wire, 0x0A090909)
    assert expected in out


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(
    weights=st.lists(st.integers(1, 1000), min_size=2, max_size=8),
    clients=st.lists(st.tuples(st.integers(0, 2**128 - 1), st.booleans()), min_size=1, max_size=30),
    select=st.sampled_from(Select),
)
def test_the_c_table_picks_the_weighted_hash_endpoint_python_picks(
    weights: list[int], clients: list[tuple[int, bool]], select: Select
) -> None:
    """Also with select first_n, whose variants carry each endpoint's backups after it."""
    addresses = (f"192.0.2.{100 + i}" for i in range(len(weights)))
    plain = svc("wh", *addresses, policy=PolicyName.HASH, select=select, max_answers=3)
    endpoints = tuple(replace(e, weight=w) for e, w in zip(plain.endpoints, weights, strict=True))
    view = make_view(replace(CONFIG, services=(*SERVICES, replace(plain, endpoints=endpoints))))
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    native = ct.build_ctable(table).native
    wire = query(f"wh.{ORIGIN}", edns=0)
    for drawn, v6 in clients:
        ip = drawn if v6 else drawn & 0xFFFFFFFF
        out = native.answer(wire, ip, v6, False, 0)
        assert out is not None  # answered in C, not left to Python
        assert out == oracle(view, table, wire, ip, v6)


def pooled_view(rules: tuple[Rule, ...]) -> View:
    """A service with pools over eu (.61), us (.62) and ap (.63), clients placed by topology networks."""
    service = svc("gp", "192.0.2.61", "192.0.2.62", "192.0.2.63")
    placed = tuple(
        replace(e, site=site) for e, site in zip(service.endpoints, ("eu", "us", "ap"), strict=True)
    )
    pools = (Pool("europe", sites=("eu",), fallback="rest"), Pool("rest", sites=("us", "ap")))
    pooled = replace(service, endpoints=placed, pools=pools, rules=rules)
    env = PolicyEnv(TopologyLocator(Topology(networks=NETWORKS), SITES), SITES, random.Random(1))
    return build_view(replace(CONFIG, services=(*SERVICES, pooled)), make_snapshot(), env)


def test_the_c_table_answers_pools_whose_rules_follow_from_the_location() -> None:
    view = pooled_view((Rule("europe", sites=("eu",)), Rule("rest")))
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    native = ct.build_ctable(table).native
    wire = query(f"gp.{ORIGIN}", edns=0)
    for ip, expected in (
        (0x0A010101, {b"\xc0\x00\x02\x3d"}),
        (0x0A020202, {b"\xc0\x00\x02\x3e", b"\xc0\x00\x02\x3f"}),
    ):
        for seq in range(3):
            out = native.answer(wire, ip, False, False, seq)
            assert out is not None
            assert out == oracle(view, table, wire, ip, seq=seq)
            assert all(address in out for address in expected)


def test_pools_with_a_networks_rule_are_left_to_python() -> None:
    rules = (Rule("europe", networks=(ipaddress.ip_network("10.1.0.0/16"),)), Rule("rest"))
    view = pooled_view(rules)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    wire = query(f"gp.{ORIGIN}", edns=0)
    assert ct.build_ctable(table).native.answer(wire, 0x0A010101, False, False) is None
    out = oracle(view, table, wire, 0x0A010101)
    assert out is not None and b"\xc0\x00\x02\x3d" in out
