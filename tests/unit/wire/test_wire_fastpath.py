"""Which queries the fast path answers itself (everything well-formed) and which go to the slow path."""

from __future__ import annotations

import random
from collections import Counter

import dns.message
import dns.rcode
from wire_support import ask, ask_wire, make_responder, query, texts

from gslbd.wire import Responder

ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"


def random_name(rng: random.Random, suffix: str) -> str:
    labels = [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 20))) for _ in range(rng.randint(1, 3))
    ]
    return ".".join(labels) + "." + suffix


def test_a_flood_of_random_names_is_answered_by_the_fast_path(responder: Responder) -> None:
    rng = random.Random(42)
    rcodes: Counter[int] = Counter()
    for i in range(3000):
        suffix = rng.choice(
            ["gslb.example.com.", "inner.gslb.example.com.", "example.org.", "example.net.", ""]
        )
        name = random_name(rng, suffix) if suffix else random_name(rng, "com.")
        rtype = rng.choice(["A", "AAAA", "TXT", "MX", "ANY", "SOA"])
        wire = query(name, rtype, edns=rng.choice([None, 0]), qid=i)
        msg = ask(responder, wire)
        rcodes[msg.rcode()] += 1
    assert responder.slow_count == 0
    assert rcodes[dns.rcode.NXDOMAIN] > 1000 and rcodes[dns.rcode.REFUSED] > 500
    assert set(rcodes) == {dns.rcode.NXDOMAIN, dns.rcode.REFUSED}


def test_every_kind_of_answer_comes_from_the_fast_path(responder: Responder) -> None:
    queries = [
        query("app.gslb.example.com."),  # policy answer
        query("app.gslb.example.com.", "AAAA", edns=0),
        query("sticky.gslb.example.com.", ecs="10.1.2.0/24"),  # location dependent, ECS echo
        query("gslb.example.com.", "NS"),  # static with glue
        query("info.gslb.example.com.", "TXT", dnssec_ok=True),
        query("solo.gslb.example.com.", "AAAA"),  # NODATA
        query("deep.gslb.example.com."),  # empty non-terminal
        query("nope.gslb.example.com."),  # NXDOMAIN
        query("www.example.net."),  # REFUSED
        query("gslb.example.com.", "AXFR"),  # REFUSED (zone transfer)
        query("app.gslb.example.com.", "ANY"),  # minimal ANY
        query("sf.gslb.example.com."),  # SERVFAIL (all_down)
        query("big.gslb.example.com."),  # truncated
        query("alias.gslb.example.com.", "AAAA"),  # CNAME
    ]
    for wire in queries:
        assert ask_wire(responder, wire) is not None
    assert ask_wire(responder, query("big.gslb.example.com."), tcp=True) is not None
    assert responder.slow_count == 0


def test_unusual_queries_go_to_the_slow_path_and_broken_ones_are_answered_before_it(
    responder: Responder,
) -> None:
    unusual = [
        query("app.gslb.example.com.", edns=1),  # BADVERS
        query("app.gslb.example.com.", rdclass=3),  # class CH
        b"\x00\x01\x28\x00" + query("app.gslb.example.com.")[4:],  # opcode UPDATE
    ]
    for count, wire in enumerate(unusual, start=1):
        ask_wire(responder, wire)
        assert responder.slow_count == count
    broken = [
        query("app.gslb.example.com.") + b"x",  # trailing junk
        query("app.gslb.example.com.")[:20],  # truncated question
    ]
    for count, wire in enumerate(broken, start=1):
        assert ask_wire(responder, wire) is not None  # FORMERR (wire/precheck.py)
        assert (responder.slow_count, responder.malformed_count) == (len(unusual), count)


def test_each_name_and_type_keeps_its_own_rotation(responder: Responder) -> None:
    def first(rtype: str) -> str:
        return texts(ask(responder, query("app.gslb.example.com.", rtype)))[0].split()[-1]

    order = [first("A"), first("AAAA"), first("A"), first("AAAA"), first("A")]
    assert order == ["192.0.2.1", "2001:db8::1", "192.0.2.2", "2001:db8::2", "192.0.2.3"]


def test_weighted_split_holds_per_query_on_the_fast_path() -> None:
    responder = make_responder(seed=11)
    counts: Counter[str] = Counter()
    for _ in range(10_000):
        counts[texts(ask(responder, query("split.gslb.example.com.")))[0].split()[-1]] += 1
    assert responder.slow_count == 0
    assert set(counts) == {"192.0.2.31", "192.0.2.32"}
    assert abs(counts["192.0.2.31"] / 10_000 - 0.5) < 0.02


def test_random_order_draws_every_order_with_the_responder_rng() -> None:
    responder = make_responder(seed=3)
    orders = Counter(
        tuple(line.split()[-1] for line in texts(ask(responder, query("shuffled.gslb.example.com."))))
        for _ in range(600)
    )
    assert len(orders) == 6  # 3 candidates: every ordering
    assert min(orders.values()) > 60


def test_responses_are_identical_bytes_for_identical_queries_to_fixed_answers(responder: Responder) -> None:
    wire = query("NoPe.gslb.example.com.", "A", edns=0, ecs="10.0.0.0/8")
    first = ask_wire(responder, wire)
    assert first is not None and first == ask_wire(responder, wire)
    msg = dns.message.from_wire(first)
    assert msg.question[0].name.to_text() == "NoPe.gslb.example.com."
