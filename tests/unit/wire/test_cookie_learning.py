"""A query for a cookie alone (RFC 7873 5.4: no question, an OPT with only a COOKIE option) gets NOERROR
with the client cookie and a server cookie when cookies are on; without cookies it stays FORMERR."""

from __future__ import annotations

import random
from dataclasses import replace

import dns.edns
import dns.flags
import dns.message
import dns.rcode
from wire_support import CONFIG, make_view

from gslbd.model.config import CookieConfig, DnsConfig
from gslbd.wire import Responder, compile_table
from gslbd.wire.cookies import COOKIE, learning_query

CLIENT = b"\x01\x02\x03\x04\x05\x06\x07\x08"
SRC = 0xCB007105


def responder(cookies: bool) -> Responder:
    dns_config = DnsConfig(cookies=CookieConfig(secret=bytes(range(16))) if cookies else None)
    view = make_view(replace(CONFIG, dns=dns_config))
    return Responder(
        compile_table(view, max_udp_payload=1232, use_client_subnet=True), view, random.Random(1)
    )


def learning(cookie: bytes = CLIENT, *, edns: int = 0, options: tuple[dns.edns.Option, ...] = ()) -> bytes:
    msg = dns.message.Message(id=777)
    msg.use_edns(edns, 0, 1232, options=[dns.edns.GenericOption(COOKIE, cookie), *options])
    return msg.to_wire()


def ask(r: Responder, wire: bytes, tcp: bool = False) -> dns.message.Message:
    out = r.handle(wire, SRC, False, tcp)
    assert out is not None
    return dns.message.from_wire(out)


def cookie_of(msg: dns.message.Message) -> bytes | None:
    found = [o for o in msg.options if o.otype == COOKIE]
    return found[0].to_wire() if found else None


def test_a_learning_query_gets_noerror_with_the_client_and_a_server_cookie() -> None:
    for tcp in (False, True):
        msg = ask(responder(True), learning(), tcp)
        assert (msg.rcode(), msg.question, msg.answer, msg.authority) == (dns.rcode.NOERROR, [], [], [])
        assert not msg.flags & dns.flags.AA
        cookie = cookie_of(msg)
        assert cookie is not None and len(cookie) == 24 and cookie[:8] == CLIENT


def test_the_server_cookie_it_learnt_is_valid_in_the_next_query() -> None:
    r = responder(True)
    first = cookie_of(ask(r, learning()))
    assert first is not None
    assert cookie_of(ask(r, learning(first))) == first  # echoed unchanged: ours and fresh
    assert r.guard is not None and r.guard.counts()["cookies_valid"] == 1


def test_without_cookies_a_query_without_a_question_stays_formerr() -> None:
    msg = ask(responder(False), learning())
    assert msg.rcode() == dns.rcode.FORMERR and cookie_of(msg) is None


def test_a_malformed_cookie_or_another_edns_version_is_not_a_learning_query() -> None:
    assert ask(responder(True), learning(b"\x01\x02\x03")).rcode() == dns.rcode.FORMERR
    assert not learning_query(learning(b"\x01\x02\x03"))
    assert not learning_query(learning(edns=1))
    assert learning_query(learning(options=(dns.edns.NSIDOption(b""),)))


def test_a_query_without_a_question_and_without_a_cookie_stays_formerr() -> None:
    msg = dns.message.Message(id=778)
    msg.use_edns(0, 0, 1232)
    assert ask(responder(True), msg.to_wire()).rcode() == dns.rcode.FORMERR
