"""The rate limiter's buckets, with a fake clock: rates, kinds, names, window, slip, prefixes, exempt,
denials per zone (NXDOMAIN, NODATA, compact denials of signed zones)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import dns.message
import dns.rcode
import dns.rdatatype
import pytest
from test_wire_dnssec import NXNAME, World, bitmap_types, signed_config
from wire_support import ask_wire, client, make_responder, query

from gslbd.clock import FakeClock
from gslbd.model.config import RrlConfig
from gslbd.wire import Responder
from gslbd.wire import rrl as Action
from gslbd.wire.rrl import MAX_BUCKETS, RateLimiter, denial_of

CONFIG = RrlConfig(responses_per_second=5, errors_per_second=2, nxdomains_per_second=3, window=4.0, slip=2)


@pytest.fixture(scope="module")
def plain() -> Responder:
    return make_responder()


def reply(responder: Responder, name: str, rtype: str = "A") -> bytes:
    out = ask_wire(responder, query(name, rtype))
    assert out is not None
    return out


def run(limiter: RateLimiter, data: bytes, count: int, src: str = "192.0.2.1") -> list[int]:
    ip, v6 = client(src)
    return [limiter.decide(data, ip, v6) for _ in range(count)]


def test_a_bucket_allows_one_second_of_rate_then_limits_and_refills_with_time(plain: Responder) -> None:
    clock = FakeClock()
    limiter = RateLimiter(CONFIG, clock.monotonic)
    data = reply(plain, "app.gslb.example.com.")
    actions = run(limiter, data, 7)
    assert actions[:5] == [Action.SEND] * 5
    assert actions[5:] == [Action.DROP, Action.SLIP]
    # The two limited responses left a debt of two tokens: 0.5 s pays it back with half a token to
    # spare (not enough; this limited response costs one more), another 0.5 s earns two and a half.
    clock.advance(0.5)
    assert run(limiter, data, 1) == [Action.DROP]
    clock.advance(0.5)
    assert run(limiter, data, 3) == [Action.SEND, Action.SEND, Action.SLIP]


def test_slip_one_truncates_every_limited_response_and_slip_zero_drops_them_all(plain: Responder) -> None:
    data = reply(plain, "app.gslb.example.com.")
    for slip, expected in ((1, Action.SLIP), (0, Action.DROP)):
        limiter = RateLimiter(replace(CONFIG, slip=slip), FakeClock().monotonic)
        assert run(limiter, data, 9)[5:] == [expected] * 4


def test_slip_three_truncates_every_third_limited_response(plain: Responder) -> None:
    limiter = RateLimiter(replace(CONFIG, slip=3), FakeClock().monotonic)
    actions = run(limiter, reply(plain, "app.gslb.example.com."), 11)[5:]
    assert actions == [Action.DROP, Action.DROP, Action.SLIP] * 2


def test_a_flooding_source_stays_limited_until_it_was_quiet_for_the_window(plain: Responder) -> None:
    clock = FakeClock()
    limiter = RateLimiter(CONFIG, clock.monotonic)
    data = reply(plain, "app.gslb.example.com.")
    for _ in range(100):  # 1,000 q/s for 1 s: the debt is floored at -window * rate
        run(limiter, data, 10)
        clock.advance(0.01)
    assert run(limiter, data, 1) != [Action.SEND]
    clock.advance(CONFIG.window - 0.5)
    assert run(limiter, data, 1) != [Action.SEND]
    clock.advance(1.0)
    assert run(limiter, data, 1) == [Action.SEND]


def test_names_types_and_kinds_have_buckets_of_their_own(plain: Responder) -> None:
    limiter = RateLimiter(CONFIG, FakeClock().monotonic)
    app = reply(plain, "app.gslb.example.com.")
    run(limiter, app, 5)
    assert run(limiter, app, 1) == [Action.DROP]
    assert run(limiter, reply(plain, "dual.gslb.example.com."), 1) == [Action.SEND]
    assert run(limiter, reply(plain, "app.gslb.example.com.", "AAAA"), 1) == [Action.SEND]
    # Letter case does not make a new bucket.
    assert run(limiter, reply(plain, "APP.gslb.example.com."), 1) == [Action.SLIP]


def test_nxdomain_for_random_names_in_one_zone_share_one_bucket_at_its_rate(plain: Responder) -> None:
    limiter = RateLimiter(CONFIG, FakeClock().monotonic)
    replies = [reply(plain, f"nope{i}.gslb.example.com.") for i in range(5)]
    assert [limiter.decide(r, *client("192.0.2.1")) for r in replies] == [Action.SEND] * 3 + [
        Action.DROP,
        Action.SLIP,
    ]


def test_errors_share_one_bucket_per_client_whatever_the_name(plain: Responder) -> None:
    limiter = RateLimiter(CONFIG, FakeClock().monotonic)
    refused = [reply(plain, f"name{i}.example.net.") for i in range(4)]
    assert [limiter.decide(r, *client("192.0.2.1")) for r in refused] == [
        Action.SEND,
        Action.SEND,
        Action.DROP,
        Action.SLIP,
    ]


def test_sources_in_one_prefix_share_a_bucket_and_other_prefixes_do_not(plain: Responder) -> None:
    limiter = RateLimiter(CONFIG, FakeClock().monotonic)
    data = reply(plain, "app.gslb.example.com.")
    run(limiter, data, 5, "192.0.2.1")
    assert run(limiter, data, 1, "192.0.2.200") == [Action.DROP]  # same /24
    assert run(limiter, data, 1, "192.0.3.1") == [Action.SEND]
    run(limiter, data, 5, "2001:db8:0:ff::1")
    assert run(limiter, data, 1, "2001:db8:0:aa::2") == [Action.DROP]  # same /56
    assert run(limiter, data, 1, "2001:db8:0:100::1") == [Action.SEND]
    exact = RateLimiter(replace(CONFIG, ipv4_prefix_length=32), FakeClock().monotonic)
    run(exact, data, 5, "127.0.0.1")
    assert run(exact, data, 1, "127.0.0.2") == [Action.SEND]


def test_exempt_networks_and_zero_rates_are_never_limited(plain: Responder) -> None:
    limiter = RateLimiter(replace(CONFIG, exempt=("10.0.0.0/8",), errors_per_second=0), FakeClock().monotonic)
    data = reply(plain, "app.gslb.example.com.")
    assert set(run(limiter, data, 50, "10.1.2.3")) == {Action.SEND}
    assert set(run(limiter, reply(plain, "x.example.net."), 50)) == {Action.SEND}
    assert Action.DROP in run(limiter, data, 50, "11.1.2.3")
    assert limiter.limited == limiter.dropped + limiter.slipped > 0


def test_the_bucket_table_stays_bounded_under_a_flood_from_many_sources(plain: Responder) -> None:
    limiter = RateLimiter(replace(CONFIG, ipv4_prefix_length=32), FakeClock().monotonic)
    data = reply(plain, "app.gslb.example.com.")
    for ip in range(MAX_BUCKETS + 10):
        limiter.decide(data, ip, False)
    assert len(limiter) <= MAX_BUCKETS


@pytest.mark.parametrize("first", ["192.0.2.10", "192.0.2.11"])
def test_exemption_is_decided_per_address_whichever_address_of_the_prefix_comes_first(
    plain: Responder, first: str
) -> None:
    # exempt .10/32 inside the default /24: .10 is never limited, .11 is, in either arrival order.
    limiter = RateLimiter(replace(CONFIG, exempt=("192.0.2.10/32",)), FakeClock().monotonic)
    data = reply(plain, "app.gslb.example.com.")
    other = "192.0.2.11" if first == "192.0.2.10" else "192.0.2.10"
    outcomes = {src: run(limiter, data, 20, src) for src in (first, other)}
    assert set(outcomes["192.0.2.10"]) == {Action.SEND}
    assert Action.DROP in outcomes["192.0.2.11"]
    assert outcomes["192.0.2.11"][:5] == [Action.SEND] * 5


def test_nodata_at_any_name_or_type_of_a_zone_shares_one_bucket_per_zone(plain: Responder) -> None:
    limiter = RateLimiter(CONFIG, FakeClock().monotonic)
    nodata = [reply(plain, "app.gslb.example.com.", t) for t in ("TXT", "MX", "SRV", "CAA", "HINFO")]
    nodata += [reply(plain, "solo.gslb.example.com.", t) for t in ("TXT", "AAAA")]
    for data in nodata:
        msg = dns.message.from_wire(data)
        assert msg.rcode() == dns.rcode.NOERROR and not msg.answer and msg.authority
    actions = [limiter.decide(r, *client("192.0.2.1")) for r in nodata]
    assert actions == [Action.SEND] * 5 + [Action.DROP, Action.SLIP]  # responses_per_second: 5
    # Its own bucket: the answers and the NXDOMAIN budget of the same zone are untouched.
    assert run(limiter, reply(plain, "app.gslb.example.com."), 1) == [Action.SEND]
    assert run(limiter, reply(plain, "nope.gslb.example.com."), 1) == [Action.SEND]


def test_compact_denials_of_random_names_count_as_nxdomain_of_the_zone(tmp_path: Path) -> None:
    world = World(signed_config(tmp_path, 15, False))
    limiter = RateLimiter(CONFIG, FakeClock().monotonic)
    replies = []
    for i in range(5):
        data = ask_wire(world.responder, query(f"r{i}x.gslb.example.com.", edns=0, dnssec_ok=True))
        assert data is not None
        msg = dns.message.from_wire(data)
        assert msg.rcode() == dns.rcode.NOERROR and not msg.answer  # RFC 9824 compact denial
        assert any(NXNAME in bitmap_types(r) for r in msg.authority if r.rdtype == dns.rdatatype.NSEC)
        replies.append(data)
    assert denial_of(replies[0]) == (b"\x04gslb\x07example\x03com\x00", True)
    actions = [limiter.decide(r, *client("192.0.2.1")) for r in replies]
    assert actions == [Action.SEND] * 3 + [Action.DROP, Action.SLIP]  # nxdomains_per_second: 3
    # The same bucket as the unsigned NXDOMAIN of that zone.
    assert run(limiter, reply(make_responder(), "nope.gslb.example.com."), 1) == [Action.DROP]
