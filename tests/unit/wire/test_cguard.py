"""Cookies, RRL and NSID as stages of the C answer path (wire/_guard.c, wire/cguard.py) give the same bytes
and the same counts as the Python paths they came from (wire/guard.py, wire/rrl.py, wire/cookies.py and the
dnspython-held fast path), which stay as the oracle; C answers ordinary queries itself with all of them on."""

from __future__ import annotations

import random
from dataclasses import replace

import dns.edns
import dns.message
import dns.rcode
import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st
from test_wire_fuzz import MUTATION, Mutation, mutate
from wire_support import CONFIG, ORIGIN, client, make_view, query

from gslbd.answer import View
from gslbd.clock import FakeClock
from gslbd.model.config import CookieConfig, DnsConfig, RrlConfig
from gslbd.wire import Responder, compile_table
from gslbd.wire import ctable as ct
from gslbd.wire.cguard import NativeGuard
from gslbd.wire.compile import AnswerTable
from gslbd.wire.cookies import CookieJar, address_bytes
from gslbd.wire.guard import Guard

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

SECRET = bytes.fromhex("e5e973e5a6b2a43f48e7dc849e37bfcf")
# Names whose answers do not depend on a random draw (C and Python draw from different generators).
NAMES = (
    f"app.{ORIGIN}",
    f"solo.{ORIGIN}",
    f"primary.{ORIGIN}",
    f"sticky.{ORIGIN}",
    f"info.{ORIGIN}",
    f"www.{ORIGIN}",
    f"mail.{ORIGIN}",
    f"sf.{ORIGIN}",
    f"nd.{ORIGIN}",
    f"to-nx.{ORIGIN}",
    f"nope.{ORIGIN}",
    f"deep.{ORIGIN}",
    f"other.nope.{ORIGIN}",
    "svc.inner.gslb.example.com.",
    "nope.inner.gslb.example.com.",
    "outside.example.net.",
)
SOURCES = ("192.0.2.10", "192.0.2.11", "198.51.100.7", "2001:db8::1", "2001:db8:0:1::1")
CLIENT_COOKIES = (bytes.fromhex("2464c4abcf10c957"), bytes.fromhex("0102030405060708"))
RRLS = (
    None,
    RrlConfig(responses_per_second=3, errors_per_second=2, nxdomains_per_second=2, window=2.0, slip=2),
    RrlConfig(
        responses_per_second=2,
        errors_per_second=0,
        nxdomains_per_second=1,
        window=5.0,
        slip=1,
        exempt=("192.0.2.10/32", "2001:db8::1/128"),
    ),
    RrlConfig(responses_per_second=1, errors_per_second=1, nxdomains_per_second=1, window=1.0, slip=0),
    RrlConfig(
        responses_per_second=2, errors_per_second=2, nxdomains_per_second=2, slip=3, ipv4_prefix_length=32
    ),
)


def pair(rrl: RrlConfig | None, cookies: bool, identity: bool) -> tuple[Responder, Responder, FakeClock]:
    """The same world answered twice: by C with the C guard, and by Python with the Python guard (the
    oracle), both on one fake clock and one cookie secret."""
    dns_config = DnsConfig(
        rrl=rrl,
        cookies=CookieConfig(secret=SECRET) if cookies else None,
        identity="ns1" if identity else None,
    )
    view = make_view(replace(CONFIG, dns=dns_config))
    clock = FakeClock()

    def responder(native: bool) -> Responder:
        table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
        return Responder(table, view, random.Random(7), native=native)

    c, python = responder(True), responder(False)
    assert isinstance(c.guard, NativeGuard) or c.guard is None
    if python.guard is not None:
        python.guard = Guard(rrl, dns_config.cookies, SECRET, monotonic=clock.monotonic, wall=clock.wall)
    return c, python, clock


def learning_query(cookie: bytes, qid: int) -> bytes:
    """A query for a cookie alone (RFC 7873 5.4): no question."""
    msg = dns.message.Message(id=qid)
    msg.use_edns(0, 0, 1232, options=[dns.edns.GenericOption(dns.edns.COOKIE, cookie)])
    return msg.to_wire()


def cookie_in(reply: bytes | None) -> bytes | None:
    if reply is None:
        return None
    try:
        msg = dns.message.from_wire(reply)
    except Exception:
        return None
    for option in msg.options:
        if option.otype == dns.edns.COOKIE:
            data: bytes = option.to_wire()
            return data
    return None


COOKIE_KINDS = ("none", "client", "echo", "forged", "foreign", "malformed")
# Steps crowd on a few names and sources, so that buckets fill and slips, drops and passes happen.
STEPS = st.tuples(
    st.one_of(st.sampled_from(NAMES[:2] + NAMES[10:11]), st.sampled_from(NAMES)),
    st.sampled_from(("A", "A", "A", "AAAA", "TXT", "MX", "AXFR", "SOA")),
    st.one_of(st.sampled_from(SOURCES[:2]), st.sampled_from(SOURCES)),
    st.sampled_from(COOKIE_KINDS),
    st.booleans(),  # EDNS
    st.booleans(),  # NSID
    st.sampled_from((False, False, False, True)),  # TCP
    st.sampled_from((0.0, 0.0, 0.0, 0.0, 0.05, 0.4, 1.5, 30.0, 2000.0)),  # seconds before the query
    st.integers(0, 9),  # 0: a learning query instead
)


@seed(21)
@settings(max_examples=150, deadline=None)
@given(
    rrl=st.sampled_from(RRLS),
    cookies=st.booleans(),
    identity=st.booleans(),
    steps=st.lists(STEPS, min_size=5, max_size=40),
)
def test_c_guard_gives_the_python_guards_bytes_and_counts(
    rrl: RrlConfig | None, cookies: bool, identity: bool, steps: list[tuple[object, ...]]
) -> None:
    c, python, clock = pair(rrl, cookies, identity)
    last: dict[str, bytes] = {}  # the cookie each source got last
    foreign = CookieJar(SECRET, clock.wall)
    for qid, (name, rtype, src, kind, edns, nsid, tcp, wait, shape) in enumerate(steps):
        assert isinstance(name, str) and isinstance(rtype, str) and isinstance(src, str)
        clock.advance(float(wait))  # type: ignore[arg-type]
        if isinstance(c.guard, NativeGuard):
            c.guard.pin(clock.monotonic(), clock.wall())
        ip, v6 = client(src)
        cookie = b""
        if kind == "client":
            cookie = CLIENT_COOKIES[qid % 2]
        elif kind == "echo":
            cookie = last.get(src, CLIENT_COOKIES[0])
        elif kind == "forged":
            echoed = last.get(src, CLIENT_COOKIES[0] + bytes(16))
            cookie = echoed[:-1] + bytes((echoed[-1] ^ 1,))
        elif kind == "foreign":  # a valid cookie of ours, made for another address
            other = client("203.0.113.99")
            stamp = int(clock.wall())
            cookie = CLIENT_COOKIES[1] + foreign.server_cookie(
                CLIENT_COOKIES[1], address_bytes(*other), stamp
            )
        elif kind == "malformed":
            cookie = bytes(qid % 3 * 7 + 9)  # 9, 16 or 23 bytes: 9 is malformed
        options: tuple[dns.edns.Option, ...] = ()
        if cookie:
            options += (dns.edns.GenericOption(dns.edns.COOKIE, cookie),)
        if nsid:
            options += (dns.edns.NSIDOption(b""),)
        if shape == 0 and cookie:
            wire = learning_query(cookie, qid)
        else:
            wire = query(name, rtype, edns=0 if edns or options else None, options=options, qid=qid)
        from_c = c.handle(wire, ip, v6, bool(tcp))
        from_python = python.handle(wire, ip, v6, bool(tcp))
        assert from_c == from_python, (qid, name, rtype, src, kind, tcp)
        got = cookie_in(from_python)
        if got is not None:
            last[src] = got
    assert c.guard_counts() == python.guard_counts()


@pytest.mark.parametrize("rrl", [None, RRLS[1]])
@pytest.mark.parametrize("cookies", [False, True])
def test_c_answers_ordinary_queries_itself_with_rrl_cookies_and_nsid_on(
    rrl: RrlConfig | None, cookies: bool
) -> None:
    c, _, _ = pair(rrl, cookies, identity=True)
    assert c.native is not None and not c.native.fallback.everything
    for name in (f"app.{ORIGIN}", f"info.{ORIGIN}", f"nope.{ORIGIN}", f"nd.{ORIGIN}"):
        for options in (
            (),
            (dns.edns.GenericOption(dns.edns.COOKIE, CLIENT_COOKIES[0]),),
            (dns.edns.NSIDOption(b""),),
            (dns.edns.GenericOption(dns.edns.COOKIE, CLIENT_COOKIES[1]), dns.edns.NSIDOption(b"")),
        ):
            wire = query(name, edns=0, options=options)
            out = c.native.native.answer(wire, *client("198.51.100.7"), True)  # TCP: never limited
            assert isinstance(out, bytes), name
            msg = dns.message.from_wire(out)
            found = {o.otype for o in msg.options}
            assert (dns.edns.COOKIE in found) == (
                cookies and any(o.otype == dns.edns.COOKIE for o in options)
            )
            if any(o.otype == dns.edns.NSID for o in options):
                nsid = next(o for o in msg.options if o.otype == dns.edns.NSID)
                assert nsid.to_wire() == b"ns1"


@pytest.mark.parametrize("first", ["192.0.2.10", "192.0.2.11"])
def test_the_c_rrl_exemption_is_decided_per_address_in_either_arrival_order(first: str) -> None:
    rrl = RrlConfig(
        responses_per_second=1, errors_per_second=1, nxdomains_per_second=1, exempt=("192.0.2.10/32",)
    )
    c, _, clock = pair(rrl, cookies=False, identity=False)
    assert isinstance(c.guard, NativeGuard)
    c.guard.pin(clock.monotonic(), clock.wall())
    second = "192.0.2.11" if first == "192.0.2.10" else "192.0.2.10"
    wire = query(f"app.{ORIGIN}")
    answered = {first: 0, second: 0}
    for _ in range(10):
        for src in (first, second):
            out = c.handle(wire, *client(src), False)
            if out is not None and dns.message.from_wire(out).answer:
                answered[src] += 1
    assert answered["192.0.2.10"] == 10  # exempt, whoever came first
    assert answered["192.0.2.11"] == 1  # the /24's one response a second
    counts = c.guard_counts()
    assert counts["rrl_limited"] == 9 and counts["rrl_dropped"] + counts["rrl_slipped"] == 9


def test_a_cookie_minted_in_python_is_valid_in_c_and_then_skips_rrl() -> None:
    """A server cookie made by the Python jar with the same secret is valid in C (verified while its
    response is within the rate, as in Python) and from then on passes RRL when the source is limited."""
    rrl = RrlConfig(responses_per_second=1, errors_per_second=1, nxdomains_per_second=1, slip=0)
    c, _, clock = pair(rrl, cookies=True, identity=False)
    assert isinstance(c.guard, NativeGuard)
    c.guard.pin(clock.monotonic(), clock.wall())
    ip, v6 = client("198.51.100.7")
    jar = CookieJar(SECRET, clock.wall)
    minted = CLIENT_COOKIES[0] + jar.server_cookie(
        CLIENT_COOKIES[0], address_bytes(ip, v6), int(clock.wall())
    )
    wire = query(f"app.{ORIGIN}", edns=0, options=(dns.edns.GenericOption(dns.edns.COOKIE, minted),))
    plain = query(f"app.{ORIGIN}", edns=0)
    for _ in range(3):
        out = c.handle(wire, ip, v6, False)
        assert out is not None and cookie_in(out) == minted
        assert dns.message.from_wire(out).rcode() == dns.rcode.NOERROR
    assert c.handle(plain, ip, v6, False) is None  # over the rate without the cookie: dropped (slip 0)
    counts = c.guard_counts()
    assert counts["cookies_valid"] == 3 and counts["rrl_cookie_passed"] == 3 and counts["rrl_dropped"] == 1


FUZZ_SEEDS = [
    query(f"app.{ORIGIN}", edns=0, options=(dns.edns.GenericOption(dns.edns.COOKIE, CLIENT_COOKIES[0]),)),
    query(
        f"nope.{ORIGIN}",
        "AAAA",
        edns=0,
        options=(
            dns.edns.NSIDOption(b""),
            dns.edns.GenericOption(dns.edns.COOKIE, CLIENT_COOKIES[1] + bytes(16)),
        ),
    ),
    query(f"info.{ORIGIN}", "TXT", ecs="10.1.2.0/24", options=(dns.edns.NSIDOption(b""),)),
    learning_query(CLIENT_COOKIES[0], 7),
    query("outside.example.net.", edns=0, options=(dns.edns.GenericOption(dns.edns.COOKIE, bytes(40)),)),
]


@seed(21)
@settings(max_examples=300, deadline=None)
@given(
    which=st.integers(0, len(FUZZ_SEEDS) - 1),
    ops=st.lists(MUTATION, min_size=1, max_size=5),
    rrl=st.sampled_from(RRLS[1:]),
    repeats=st.integers(1, 4),
)
def test_mutated_queries_get_the_same_guarded_answer_from_c_and_python(
    which: int, ops: list[Mutation], rrl: RrlConfig, repeats: int
) -> None:
    """Bit flips, cuts and splices of cookie and NSID queries: the C stages read any query safely and
    decide as the Python ones (a crash in C would end the test process)."""
    c, python, clock = pair(rrl, cookies=True, identity=True)
    assert isinstance(c.guard, NativeGuard)
    c.guard.pin(clock.monotonic(), clock.wall())
    packet = mutate(FUZZ_SEEDS[which], ops)
    for _ in range(repeats):
        assert c.handle(packet, *client("192.0.2.10"), False) == python.handle(
            packet, *client("192.0.2.10"), False
        )
    assert c.guard_counts() == python.guard_counts()


def test_a_new_cookie_secret_on_reload_reaches_the_c_table() -> None:
    """A reload with another secret (the file replaced: rotation) gives the responder a new C guard and
    the C table it builds carries it: cookies of the old secret are replaced, the new ones are valid."""

    def view_with(secret: bytes) -> tuple[View, AnswerTable]:
        view = make_view(replace(CONFIG, dns=DnsConfig(cookies=CookieConfig(secret=secret))))
        return view, compile_table(view, max_udp_payload=1232, use_client_subnet=True)

    old_view, old_table = view_with(SECRET)
    c = Responder(old_table, old_view, random.Random(7), native=True)
    ip, v6 = client("198.51.100.7")
    first = cookie_in(
        c.handle(
            query(f"app.{ORIGIN}", edns=0, options=(dns.edns.CookieOption(CLIENT_COOKIES[0], b""),)), ip, v6
        )
    )
    assert first is not None
    echo = query(f"app.{ORIGIN}", edns=0, options=(dns.edns.GenericOption(dns.edns.COOKIE, first),))
    assert cookie_in(c.handle(echo, ip, v6)) == first  # valid under the old secret
    old_guard = c.guard
    new_view, new_table = view_with(bytes(range(16)))
    c.swap(new_table, new_view)
    assert isinstance(c.guard, NativeGuard) and c.guard is not old_guard
    assert c.native is not None and not c.native.fallback.everything
    out = c.native.native.answer(echo, ip, v6, False)
    assert isinstance(out, bytes)
    fresh = cookie_in(out)
    assert fresh is not None and fresh != first and fresh[:8] == CLIENT_COOKIES[0]
    again = query(f"app.{ORIGIN}", edns=0, options=(dns.edns.GenericOption(dns.edns.COOKIE, fresh),))
    assert cookie_in(c.handle(again, ip, v6)) == fresh
    assert c.guard_counts() == {"cookies_new": 0, "cookies_valid": 1, "cookies_invalid": 1}
