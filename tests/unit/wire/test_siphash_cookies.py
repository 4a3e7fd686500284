"""SipHash-2-4 and RFC 9018 server cookies against the published test vectors."""

from __future__ import annotations

import ipaddress

import pytest

from gslbd.clock import FakeClock
from gslbd.wire.cookies import (
    COOKIE,
    CookieJar,
    Verdict,
    add_option,
    address_bytes,
    find_cookie,
    opt_rdata,
)
from gslbd.wire.siphash import siphash24

# The reference implementation's vectors: key 00..0f, message 00..(n-1).
SIPHASH_VECTORS = {
    0: "310e0edd47db6f72",
    1: "fd67dc93c539f874",
    8: "6224939a79f5f593",
    15: "e545be4961ca29a1",
}


@pytest.mark.parametrize(("length", "expected"), sorted(SIPHASH_VECTORS.items()))
def test_siphash24_matches_the_reference_vectors(length: int, expected: str) -> None:
    assert siphash24(bytes(range(16)), bytes(range(length))).hex() == expected


def test_siphash24_refuses_a_key_that_is_not_16_bytes() -> None:
    with pytest.raises(ValueError, match="16-byte key"):
        siphash24(b"short", b"")


def _address(text: str) -> bytes:
    ip = ipaddress.ip_address(text)
    return address_bytes(int(ip), ip.version == 6)


# RFC 9018 Appendix A: (secret, client cookie, client address, timestamp, server cookie).
RFC9018 = [
    ("e5e973e5a6b2a43f48e7dc849e37bfcf", "2464c4abcf10c957", "198.51.100.100", 1559731985,
     "010000005cf79f111f8130c3eee29480"),
    ("e5e973e5a6b2a43f48e7dc849e37bfcf", "2464c4abcf10c957", "198.51.100.100", 1559734385,
     "010000005cf7a871d4a564a1442aca77"),
    ("e5e973e5a6b2a43f48e7dc849e37bfcf", "fc93fc62807ddb86", "203.0.113.203", 1559734700,
     "010000005cf7a9acf73a7810aca2381e"),
    ("445536bcd2513298075a5d379663c962", "22681ab97d52c298", "2001:db8:220:1:59de:d0f4:8769:82b8",
     1559741961, "010000005cf7c609a6bb79d16625507a"),
]  # fmt: skip


@pytest.mark.parametrize(("secret", "client", "address", "stamp", "expected"), RFC9018)
def test_server_cookie_matches_rfc9018_appendix_a(
    secret: str, client: str, address: str, stamp: int, expected: str
) -> None:
    jar = CookieJar(bytes.fromhex(secret), FakeClock().wall)
    assert jar.server_cookie(bytes.fromhex(client), _address(address), stamp).hex() == expected


def _jar_at(stamp: int, secret: str = "e5e973e5a6b2a43f48e7dc849e37bfcf") -> tuple[CookieJar, FakeClock]:
    clock = FakeClock(start=0.0, wall_offset=float(stamp))
    return CookieJar(bytes.fromhex(secret), clock.wall), clock


def test_a_client_cookie_alone_gets_the_rfc9018_a1_server_cookie() -> None:
    jar, _ = _jar_at(1559731985)
    verdict, reply = jar.answer(bytes.fromhex("2464c4abcf10c957"), _address("198.51.100.100"))
    assert verdict == Verdict.CLIENT_ONLY
    assert reply.hex() == "2464c4abcf10c957010000005cf79f111f8130c3eee29480"


def test_a_valid_cookie_older_than_half_an_hour_is_renewed_as_in_rfc9018_a2() -> None:
    jar, _ = _jar_at(1559734385)
    sent = bytes.fromhex("2464c4abcf10c957010000005cf79f111f8130c3eee29480")
    verdict, reply = jar.answer(sent, _address("198.51.100.100"))
    assert verdict == Verdict.VALID
    assert reply.hex() == "2464c4abcf10c957010000005cf7a871d4a564a1442aca77"


def test_the_reserved_bytes_a_client_sent_are_hashed_as_in_rfc9018_a3() -> None:
    jar, _ = _jar_at(0x5CF78F71 + 60)
    sent = bytes.fromhex("fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5")
    verdict, reply = jar.answer(sent, _address("203.0.113.203"))
    assert verdict == Verdict.VALID
    assert reply == sent  # fresh: echoed unchanged


def test_a_valid_fresh_cookie_is_echoed_and_the_same_from_another_address_is_not_valid() -> None:
    jar, clock = _jar_at(1559731985)
    address = _address("198.51.100.100")
    _, issued = jar.answer(bytes.fromhex("2464c4abcf10c957"), address)
    clock.advance(600)
    assert jar.answer(issued, address) == (Verdict.VALID, issued)
    verdict, fresh = jar.answer(issued, _address("198.51.100.101"))
    assert verdict == Verdict.INVALID
    assert fresh[:8] == issued[:8] and fresh != issued


def test_a_cookie_older_than_an_hour_or_from_the_future_is_invalid() -> None:
    jar, clock = _jar_at(1559731985)
    address = _address("198.51.100.100")
    _, issued = jar.answer(bytes.fromhex("2464c4abcf10c957"), address)
    clock.advance(3601)
    assert jar.answer(issued, address)[0] == Verdict.INVALID
    early, _ = _jar_at(1559731985 - 301)
    assert early.answer(issued, address)[0] == Verdict.INVALID


def test_a_cookie_made_with_another_secret_is_invalid() -> None:
    jar, _ = _jar_at(1559741961, "445536bcd2513298075a5d379663c962")
    old = bytes.fromhex("22681ab97d52c298010000005cf7c57926556bd0934c72f8")
    verdict, reply = jar.answer(old, _address("2001:db8:220:1:59de:d0f4:8769:82b8"))
    assert verdict == Verdict.INVALID
    assert reply.hex() == "22681ab97d52c298010000005cf7c609a6bb79d16625507a"  # RFC 9018 A.4


def _query_with_options(options: bytes) -> bytes:
    header = bytes.fromhex("1234 0000 0001 0000 0000 0001")
    question = b"\x03www\x07example\x00\x00\x01\x00\x01"
    opt = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00" + len(options).to_bytes(2, "big") + options
    return header + question + opt


def _option(code: int, value: bytes) -> bytes:
    return code.to_bytes(2, "big") + len(value).to_bytes(2, "big") + value


@pytest.mark.parametrize(
    ("size", "verdict"),
    [(0, Verdict.MALFORMED), (7, Verdict.MALFORMED), (8, Verdict.CLIENT_ONLY), (9, Verdict.MALFORMED),
     (15, Verdict.MALFORMED), (16, Verdict.CLIENT_ONLY), (40, Verdict.CLIENT_ONLY), (41, Verdict.MALFORMED)],
)  # fmt: skip
def test_find_cookie_accepts_the_lengths_of_rfc7873_only(size: int, verdict: Verdict) -> None:
    assert find_cookie(_query_with_options(_option(COOKIE, bytes(size))))[0] == verdict


def test_find_cookie_takes_the_first_cookie_option_after_others() -> None:
    data = _query_with_options(_option(3, b"") + _option(COOKIE, b"A" * 8) + _option(COOKIE, b"B" * 3))
    assert find_cookie(data) == (Verdict.CLIENT_ONLY, b"A" * 8)
    assert find_cookie(_query_with_options(b""))[0] == Verdict.NONE


def test_add_option_extends_the_opt_record_that_ends_a_message() -> None:
    data = _query_with_options(_option(3, b""))
    out = add_option(data, COOKIE, b"C" * 24)
    assert out is not None
    span = opt_rdata(out)
    assert span is not None and out[span[0] :] == _option(3, b"") + _option(COOKIE, b"C" * 24)


def test_add_option_leaves_a_message_alone_when_the_opt_record_is_not_last() -> None:
    data = _query_with_options(b"")
    signed = data[:11] + b"\x02" + data[12:] + b"\x00\x00\xfa\x00\xff\x00\x00\x00\x00\x00\x00"
    assert opt_rdata(signed) is not None
    assert add_option(signed, COOKIE, b"x" * 8) is None
