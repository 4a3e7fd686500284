"""Cookies and RRL applied by the responder to real responses of the fast and slow paths."""

from __future__ import annotations

from dataclasses import replace

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rrset
import pytest
from wire_support import CONFIG, ask, ask_wire, client, make_responder, make_view, query

from gslbd.clock import FakeClock
from gslbd.model.config import CookieConfig, DnsConfig, RrlConfig
from gslbd.wire import Responder
from gslbd.wire.ede import RATE_LIMITED, RATE_LIMITED_OPTION
from gslbd.wire.guard import Guard

SECRET = bytes.fromhex("e5e973e5a6b2a43f48e7dc849e37bfcf")
RRL = RrlConfig(responses_per_second=2, errors_per_second=2, nxdomains_per_second=2, window=2.0, slip=2)
CLIENT_COOKIE = bytes.fromhex("2464c4abcf10c957")


def guarded(rrl: RrlConfig | None = RRL, cookies: CookieConfig | None = None) -> tuple[Responder, FakeClock]:
    dns_config = DnsConfig(rrl=rrl, cookies=cookies)
    responder = make_responder(make_view(replace(CONFIG, dns=dns_config)))
    clock = FakeClock()
    responder.guard = Guard(rrl, cookies, SECRET, monotonic=clock.monotonic, wall=clock.wall)
    return responder, clock


def cookie_query(name: str, cookie: bytes, rtype: str = "A") -> bytes:
    return query(name, rtype, edns=0, options=(dns.edns.GenericOption(dns.edns.COOKIE, cookie),))


def cookie_of(msg: dns.message.Message) -> bytes | None:
    for option in msg.options:
        if option.otype == dns.edns.COOKIE:
            return option.to_wire()
    return None


def test_no_guard_when_rrl_and_cookies_are_off() -> None:
    assert make_responder().guard is None


def test_a_client_cookie_gets_our_server_cookie_on_fast_and_slow_answers() -> None:
    responder, _ = guarded(rrl=None, cookies=CookieConfig())
    for name, rtype in (
        ("app.gslb.example.com.", "A"),
        ("nope.gslb.example.com.", "A"),
        ("x.example.net.", "TXT"),
    ):
        msg = ask(responder, cookie_query(name, CLIENT_COOKIE, rtype))
        cookie = cookie_of(msg)
        assert cookie is not None and len(cookie) == 24 and cookie[:8] == CLIENT_COOKIE
        assert cookie[8:12] == b"\x01\x00\x00\x00"


def test_a_valid_server_cookie_is_echoed_and_a_bad_one_replaced() -> None:
    responder, _ = guarded(rrl=None, cookies=CookieConfig())
    issued = cookie_of(ask(responder, cookie_query("app.gslb.example.com.", CLIENT_COOKIE)))
    assert issued is not None
    again = ask(responder, cookie_query("app.gslb.example.com.", issued))
    assert cookie_of(again) == issued and again.rcode() == dns.rcode.NOERROR and again.answer
    forged = issued[:-1] + bytes((issued[-1] ^ 1,))
    fresh = ask(responder, cookie_query("app.gslb.example.com.", forged))
    assert fresh.rcode() == dns.rcode.NOERROR and fresh.answer
    assert cookie_of(fresh) not in (None, forged)
    assert responder.guard_counts() == {"cookies_new": 1, "cookies_valid": 1, "cookies_invalid": 1}


@pytest.mark.parametrize("size", [0, 7, 9, 15, 41])
def test_a_malformed_cookie_gets_formerr_without_a_cookie(size: int) -> None:
    responder, _ = guarded(rrl=None, cookies=CookieConfig())
    msg = ask(responder, cookie_query("app.gslb.example.com.", bytes(size)))
    assert msg.rcode() == dns.rcode.FORMERR
    assert cookie_of(msg) is None


def test_a_reply_that_outgrows_the_udp_size_with_the_cookie_is_truncated() -> None:
    guard = Guard(None, CookieConfig(), SECRET, max_udp_payload=1232)
    wire = cookie_query("app.gslb.example.com.", CLIENT_COOKIE)
    request = dns.message.from_wire(wire)
    reply = dns.message.make_response(request)
    reply.use_edns(0, 0, 1232)
    texts = ('"' + "x" * 200 + '"', '"' + "y" * 220 + '"')
    reply.answer.append(dns.rrset.from_text("app.gslb.example.com.", 30, "IN", "TXT", *texts))
    plain = reply.to_wire()
    assert 512 - 28 < len(plain) <= 512
    ip, v6 = client("192.0.2.1")
    small = query("app.gslb.example.com.", edns=0, payload=512, options=request.options)
    out = guard.apply(small, plain, ip, v6, False)
    assert out is not None and len(out) < 512
    msg = dns.message.from_wire(out)
    assert msg.flags & dns.flags.TC and not msg.answer and cookie_of(msg) is not None
    roomy = guard.apply(wire, plain, ip, v6, False)  # payload 1232: room for the cookie
    assert roomy is not None and len(roomy) == len(plain) + 28
    assert guard.apply(small, plain, ip, v6, True) == roomy  # TCP: never truncated


def test_rrl_drops_and_slips_udp_answers_over_the_rate_and_never_tcp() -> None:
    responder, _ = guarded()
    wire = query("app.gslb.example.com.", edns=0)
    out = [ask_wire(responder, wire) for _ in range(6)]
    assert all(o is not None and not dns.message.from_wire(o).flags & dns.flags.TC for o in out[:2])
    assert out[2] is None and out[4] is None
    for slipped in (out[3], out[5]):
        assert slipped is not None and len(slipped) <= len(wire) + 6
        msg = dns.message.from_wire(slipped)
        assert msg.flags & dns.flags.TC and not msg.answer and msg.question
        assert [(o.otype, o.to_wire()) for o in msg.options] == [(dns.edns.EDE, RATE_LIMITED_OPTION[4:])]
        [ede] = msg.options
        assert isinstance(ede, dns.edns.EDEOption) and (ede.code, ede.text or "") == RATE_LIMITED
    assert all(ask_wire(responder, wire, tcp=True) is not None for _ in range(20))
    assert responder.guard_counts() == {
        "rrl_limited": 4,
        "rrl_dropped": 2,
        "rrl_slipped": 2,
        "rrl_cookie_passed": 0,
    }


def test_a_slipped_answer_without_edns_is_header_and_question_only() -> None:
    responder, _ = guarded()
    wire = query("app.gslb.example.com.")
    out = [ask_wire(responder, wire) for _ in range(4)]
    assert out[3] is not None and len(out[3]) == len(wire)
    assert out[3][2] & 0x02 and out[3][12:] == wire[12:]


def test_rrl_lets_a_client_with_a_valid_server_cookie_through() -> None:
    responder, _ = guarded(cookies=CookieConfig())
    issued = cookie_of(ask(responder, cookie_query("app.gslb.example.com.", CLIENT_COOKIE)))
    assert issued is not None
    valid = cookie_query("app.gslb.example.com.", issued)
    assert all(not ask(responder, valid).flags & dns.flags.TC for _ in range(20))
    only_client = cookie_query("app.gslb.example.com.", CLIENT_COOKIE)
    limited = [ask_wire(responder, only_client) for _ in range(4)]
    assert None in limited
    assert responder.guard_counts()["rrl_cookie_passed"] == 20


def test_another_source_is_answered_while_one_is_limited() -> None:
    responder, _ = guarded(rrl=replace(RRL, ipv4_prefix_length=32))
    wire = query("app.gslb.example.com.")
    for _ in range(10):
        ask_wire(responder, wire, src="127.0.0.1")
    ip, v6 = client("127.0.0.2")
    assert responder.handle(wire, ip, v6) is not None


def test_forged_cookies_over_the_rate_are_dropped_before_any_hashing() -> None:
    responder, _ = guarded(cookies=CookieConfig())
    for i in range(10):
        client_cookie = i.to_bytes(8, "big")
        ask_wire(responder, cookie_query("app.gslb.example.com.", client_cookie + bytes(16)))
    counts = responder.guard_counts()
    assert counts["rrl_dropped"] == 4 and counts["rrl_slipped"] == 4
    # Only the responses that were sent (2 answered, 4 truncated) made a server cookie.
    assert counts["cookies_invalid"] == 6


def test_a_valid_cookie_the_jar_forgot_is_verified_when_its_response_is_not_dropped() -> None:
    responder, _ = guarded(cookies=CookieConfig())
    issued = cookie_of(ask(responder, cookie_query("app.gslb.example.com.", CLIENT_COOKIE)))
    assert issued is not None
    other, _ = guarded(cookies=CookieConfig())  # the same secret, an empty table: another worker
    msg = ask(other, cookie_query("app.gslb.example.com.", issued))
    assert cookie_of(msg) == issued and msg.answer
    assert other.guard_counts()["cookies_valid"] == 1
