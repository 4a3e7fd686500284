"""The C table answers exactly like the dnspython slow path, its oracle (property test over random queries);
without the C extension the responder answers with the slow path itself."""

from __future__ import annotations

import ipaddress
import random
from dataclasses import replace
from typing import Any

import dns.edns
import dns.message
import dns.name
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_support import CONFIG, INNER, ORIGIN, OTHER, FixedDraw, left_to_python, make_view, query

from gslbd.model.config import DnsConfig
from gslbd.wire import Responder, compile_table, slow_response
from gslbd.wire import ctable as ct

VIEW = make_view()
# The same world with dns.identity and dns.version set: NSID answered on both paths.
VIEW_ID = make_view(replace(CONFIG, dns=DnsConfig(identity="ns1-w{worker}", version="gslbd")))
EXISTING = sorted(VIEW.names)
ZONES = sorted(VIEW.zones)
LABEL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)
LONG_LABEL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=40, max_size=63)
QTYPES: list[str | int] = [
    "A",
    "AAAA",
    "CNAME",
    "SOA",
    "NS",
    "TXT",
    "MX",
    "ANY",
    "HTTPS",
    "SRV",
    "PTR",
    "NSEC",  # meta-types: NODATA without a signer (wire/metatypes.py answers them with DO when signed)
    "RRSIG",
    "AXFR",
    "IXFR",
    0,
    65280,
]
PAYLOADS = st.one_of(
    st.sampled_from([0, 1, 511, 512, 513, 1231, 1232, 1233, 4096, 65535]),
    st.integers(560, 720),  # around the size of the 40-address answer
    st.integers(0, 65535),
)


def names() -> st.SearchStrategy[str]:
    existing = st.sampled_from(EXISTING)
    below = st.tuples(st.lists(LABEL, min_size=1, max_size=3), st.sampled_from(EXISTING)).map(
        lambda t: ".".join(t[0]) + "." + t[1]
    )
    outside = st.lists(LABEL, min_size=1, max_size=4).map(lambda labels: ".".join(labels) + ".")
    long = st.tuples(
        st.lists(LONG_LABEL, min_size=1, max_size=4), st.sampled_from([ORIGIN, INNER, OTHER])
    ).map(lambda t: ".".join(t[0]) + "." + t[1])
    return st.one_of(existing, existing, below, outside, long, st.just("."))


def random_case(name: str, rng: random.Random) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c for c in name)


def ecs_texts() -> st.SearchStrategy[str | None]:
    v4 = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 32)).map(
        lambda t: str(ipaddress.ip_network((t[0] >> (32 - t[1]) << (32 - t[1]), t[1])))
    )
    v6 = st.tuples(st.integers(0, 2**128 - 1), st.integers(0, 128)).map(
        lambda t: str(ipaddress.ip_network((t[0] >> (128 - t[1]) << (128 - t[1]), t[1])))
    )
    return st.one_of(st.none(), v4, v6)


def sources() -> st.SearchStrategy[tuple[int, bool]]:
    return st.one_of(
        st.integers(0, 2**32 - 1).map(lambda ip: (ip, False)),
        st.integers(0, 2**128 - 1).map(lambda ip: (ip, True)),
    )


def normalized(wire: bytes) -> dict[str, Any]:
    """What a client sees in a response: header, question (with case), records in order, OPT.
    Rdata is compared in canonical form: the letter case of names inside rdata may differ (the
    slow path compresses them against the question, in the client's case)."""
    msg = dns.message.from_wire(wire)

    def section(rrsets: list[Any]) -> list[Any]:
        return [
            (r.name.to_text(), r.rdclass, r.rdtype, r.ttl, [rd.to_digestable() for rd in r]) for r in rrsets
        ]

    return {
        "id": msg.id,
        "flags": int(msg.flags),
        "rcode": msg.rcode(),
        "question": [(q.name.to_text(), q.rdclass, q.rdtype) for q in msg.question],
        "answer": section(msg.answer),
        "authority": section(msg.authority),
        "additional": section(msg.additional),
        "edns": (msg.edns, msg.payload, msg.ednsflags),
        "options": [o.to_text() for o in msg.options],
    }


@settings(max_examples=400)
@given(data=st.data())
@pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")
def test_the_c_table_and_the_slow_path_give_the_same_response(data: st.DataObject) -> None:
    name = random_case(data.draw(names(), "name"), random.Random(data.draw(st.integers(0, 1000), "case")))
    if sum(len(label) + 1 for label in name.split(".") if label) + 1 > 255:
        name = name[name.index(".") + 1 :]  # drop the first label: at most 255 bytes on the wire
    rtype = data.draw(st.sampled_from(QTYPES), "rtype")
    edns = data.draw(st.sampled_from([None, 0]), "edns")
    ecs = data.draw(ecs_texts(), "ecs") if edns is not None else None
    cookie = data.draw(st.booleans(), "cookie") and edns is not None
    options: tuple[dns.edns.Option, ...] = (dns.edns.CookieOption(b"cookie!!", b""),) if cookie else ()
    if edns is not None and data.draw(st.booleans(), "nsid"):
        options += (dns.edns.NSIDOption(b""),)
    view = data.draw(st.sampled_from([VIEW, VIEW_ID]), "view")
    worker = data.draw(st.integers(0, 4), "worker")
    wire = query(
        name,
        rtype,
        edns=edns,
        payload=data.draw(PAYLOADS, "payload"),
        ecs=ecs,
        options=options,
        rd=data.draw(st.booleans(), "rd"),
        cd=data.draw(st.booleans(), "cd"),
        dnssec_ok=edns is not None and data.draw(st.booleans(), "do"),
        qid=data.draw(st.integers(0, 65535), "id"),
    )
    max_udp_payload = data.draw(st.sampled_from([512, 600, 690, 700, 1232, 4096]), "max_udp_payload")
    use_client_subnet = data.draw(st.booleans(), "use_client_subnet")
    tcp = data.draw(st.booleans(), "tcp")
    ip, v6 = data.draw(sources(), "source")
    draw = data.draw(st.floats(0.0, 1.0, exclude_max=True), "draw")
    seq = data.draw(st.integers(0, 1000), "seq")

    table = compile_table(
        view, max_udp_payload=max_udp_payload, use_client_subnet=use_client_subnet, worker=worker
    )
    # C against the slow path for the same choice (more worlds: tests/unit/wire/test_ctable.py)
    fast = ct.build_ctable(table).native.answer(wire, ip, v6, tcp, seq, draw)
    slow = slow_response(
        wire,
        view,
        ip,
        v6,
        tcp=tcp,
        max_udp_payload=max_udp_payload,
        use_client_subnet=use_client_subnet,
        rng=FixedDraw(draw),
        seq=seq,
        identity=table.identity,
        version=view.config.dns.version,
    )
    assert slow is not None
    if fast is None:  # what C leaves to Python by design: the responder answers it with the slow path
        assert left_to_python(table, wire)
        return
    assert normalized(fast) == normalized(slow)
    assert fast == slow, "C writes the slow path's bytes"
    if not tcp:
        limit = (
            512 if edns is None else min(max(int(dns.message.from_wire(wire).payload), 512), max_udp_payload)
        )
        assert len(fast) <= limit


def test_a_cname_to_a_hashed_service_echoes_the_hash_scope_on_both_paths() -> None:
    # static CNAME -> policy: hash: the answer depends on the client's /24 only, whichever path writes it
    wire = query("to-sticky." + ORIGIN, "A", edns=0, ecs="0.0.0.0/25")
    table = compile_table(VIEW, max_udp_payload=1232, use_client_subnet=True)
    fast = Responder(table, VIEW, random.Random(1), native=False).handle(wire, 1, False, False)
    slow = slow_response(
        wire,
        VIEW,
        1,
        False,
        max_udp_payload=1232,
        use_client_subnet=True,
        rng=random.Random(1),
        tcp=False,
        seq=0,
    )
    assert fast is not None and slow is not None
    assert normalized(fast)["options"] == normalized(slow)["options"] == ["ECS 0.0.0.0/25 scope/24"]
