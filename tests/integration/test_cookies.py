"""DNS cookies on a real gslbd: dig +cookie, workers sharing the secret, and Knot DNS with the same secret.

Knot (mod-cookies) makes RFC 9018 server cookies too, so with one secret each server must accept the
other's cookies: the interoperability RFC 9018 exists for (anycast instances of different make).
Where Knot differs: it answers BADCOOKIE to a UDP query that has no valid server cookie yet (a
client cookie alone, or a stale one) and makes the client retry; gslbd answers such a query normally
with a fresh server cookie (RFC 7873 5.2.3 and 5.2.4 allow both; clients that do not retry still get
answers). See docs/cookies.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dns.edns
import dns.flags
import dns.message
import dns.query
import dns.rcode
import pytest
from gslbd_harness import Running, running_gslbd
from knot_support import Knot, knotd_binary, running_knot

ZONE = "gslb.example.com."
SECRET = "e5e973e5a6b2a43f48e7dc849e37bfcf"
CLIENT = bytes.fromhex("2464c4abcf10c957")

CONFIG = f"""
version: 1
dns:
  listen: @LISTEN@
  cookies: @COOKIES@
zones:
  - origin: {ZONE}
    ttl: 30
    negative_ttl: 30
    nameservers: [{{name: ns1.{ZONE}, address: 192.0.2.53}}]
services:
  - {{name: app.{ZONE}, check: none, endpoints: [{{address: 192.0.2.1}}]}}
"""

KNOT_ZONE = f"""$ORIGIN {ZONE}
$TTL 30
@ SOA ns1 hostmaster 1 3600 600 86400 30
@ NS ns1
ns1 A 192.0.2.53
app A 192.0.2.1
"""


@pytest.fixture(scope="module")
def gslbd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """gslbd with the RFC 9018 example secret in a secret file."""
    workdir = tmp_path_factory.mktemp("cookies")
    (workdir / "cookie.key").write_text(SECRET + "\n")
    config = CONFIG.replace("@COOKIES@", "{secret_file: cookie.key}")
    with running_gslbd(workdir, config, zone=ZONE) as server:
        yield server


@pytest.fixture(scope="module")
def knot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Knot]:
    if knotd_binary() is None:
        pytest.skip("knotd is not installed (scripts/test installs the Debian package knot)")
    modules = f"mod-cookies:\n  - id: c\n    secret: 0x{SECRET}\n"
    with running_knot(
        tmp_path_factory.mktemp("knot"), ZONE, KNOT_ZONE, modules=modules, zone_modules=("mod-cookies/c",)
    ) as server:
        yield server


def ask(
    port: int, cookie: bytes, name: str = f"app.{ZONE}", source: str | None = None
) -> dns.message.Message:
    query = dns.message.make_query(name, "A", use_edns=0)
    query.flags &= ~dns.flags.RD
    query.use_edns(0, 0, 1232, options=[dns.edns.GenericOption(dns.edns.COOKIE, cookie)])
    return dns.query.udp(query, "127.0.0.1", port=port, timeout=3, source=source)


def cookie_of(msg: dns.message.Message) -> bytes:
    found = [o.to_wire() for o in msg.options if o.otype == dns.edns.COOKIE]
    assert len(found) == 1, msg
    return found[0]


def cookie_line(dig_output: str) -> str:
    lines = [line for line in dig_output.splitlines() if line.startswith("; COOKIE:")]
    assert len(lines) == 1, dig_output
    return lines[0]


def test_dig_cookie_gets_a_good_server_cookie_and_the_answer(gslbd: Running) -> None:
    out = gslbd.dig("+cookie", f"app.{ZONE}")
    assert "status: NOERROR" in out and "BADCOOKIE" not in out
    line = cookie_line(out)
    assert line.endswith("(good)")
    assert len(line.split()[2]) == 48  # client 8 + server 16 bytes, in hex
    assert "192.0.2.1" in out


def test_dig_with_a_stale_server_cookie_gets_a_fresh_one_without_badcookie(gslbd: Running) -> None:
    stale = "2464c4abcf10c957010000005cf79f111f8130c3eee29480"  # RFC 9018 A.1: from 2019
    out = gslbd.dig(f"+cookie={stale}", "+nobadcookie", f"app.{ZONE}")
    assert "status: NOERROR" in out and "BADCOOKIE" not in out
    fresh = cookie_line(out).split()[2]
    assert fresh.startswith("2464c4abcf10c957") and fresh != stale


@pytest.mark.parametrize("size", [5, 12, 44])
def test_a_malformed_cookie_option_gets_formerr(gslbd: Running, size: int) -> None:
    reply = ask(gslbd.port, bytes(size))
    assert reply.rcode() == dns.rcode.FORMERR
    assert not [o for o in reply.options if o.otype == dns.edns.COOKIE]


def test_workers_share_the_random_secret(tmp_path: Path) -> None:
    config = CONFIG.replace("@COOKIES@", "{}").replace("  cookies:", "  workers: 2\n  cookies:")
    with running_gslbd(tmp_path, config, zone=ZONE) as server:
        issued = cookie_of(ask(server.port, CLIENT))
        # Fresh sockets, fresh source ports: SO_REUSEPORT spreads them over both workers.
        echoed = {cookie_of(ask(server.port, issued)) for _ in range(16)}
        assert echoed == {issued}


def test_knot_and_gslbd_accept_each_others_cookies_made_with_one_secret(gslbd: Running, knot: Knot) -> None:
    from_knot = ask(knot.port, CLIENT)
    # Knot insists on a valid server cookie: BADCOOKIE with one for the retry (the difference above).
    assert from_knot.rcode() == dns.rcode.BADCOOKIE
    knot_cookie = cookie_of(from_knot)
    ours = cookie_of(ask(gslbd.port, CLIENT))
    # The same shape: client cookie, version 1, reserved 0, a timestamp within seconds, 8 bytes of hash.
    for cookie in (knot_cookie, ours):
        assert len(cookie) == 24 and cookie[:8] == CLIENT and cookie[8:12] == b"\x01\x00\x00\x00"
    assert abs(int.from_bytes(knot_cookie[12:16], "big") - int.from_bytes(ours[12:16], "big")) <= 5
    # Knot's cookie is valid here (and fresh, so echoed unchanged); ours is valid at Knot.
    assert cookie_of(ask(gslbd.port, knot_cookie)) == knot_cookie
    at_knot = ask(knot.port, ours)
    assert at_knot.rcode() == dns.rcode.NOERROR and at_knot.answer
    assert cookie_of(at_knot)[:8] == CLIENT
    # The cookie is bound to the client's address: from 127.0.0.2 it is not valid at either server.
    assert cookie_of(ask(gslbd.port, ours, source="127.0.0.2")) != ours
    assert ask(knot.port, ours, source="127.0.0.2").rcode() == dns.rcode.BADCOOKIE


def test_knot_and_gslbd_both_answer_formerr_to_a_malformed_cookie(gslbd: Running, knot: Knot) -> None:
    for port in (gslbd.port, knot.port):
        assert ask(port, bytes(5)).rcode() == dns.rcode.FORMERR


def learning_query(cookie: bytes) -> dns.message.Message:
    """RFC 7873 5.4: no question, an OPT with only a COOKIE option."""
    query = dns.message.Message()
    query.use_edns(0, 0, 1232, options=[dns.edns.GenericOption(dns.edns.COOKIE, cookie)])
    return query


def test_a_learning_query_without_a_question_gets_noerror_and_a_server_cookie(gslbd: Running) -> None:
    reply = dns.query.udp(learning_query(CLIENT), "127.0.0.1", port=gslbd.port, timeout=3)
    assert (reply.rcode(), reply.question, reply.answer) == (dns.rcode.NOERROR, [], [])
    learnt = cookie_of(reply)
    assert len(learnt) == 24 and learnt[:8] == CLIENT
    # The cookie it learnt is good for the next query: echoed unchanged with the answer.
    answer = ask(gslbd.port, learnt)
    assert answer.rcode() == dns.rcode.NOERROR and answer.answer and cookie_of(answer) == learnt
    over_tcp = dns.query.tcp(learning_query(CLIENT), "127.0.0.1", port=gslbd.port, timeout=3)
    assert over_tcp.rcode() == dns.rcode.NOERROR and cookie_of(over_tcp)[:8] == CLIENT


def test_knot_answers_a_learning_query_formerr_where_gslbd_follows_rfc7873(
    gslbd: Running, knot: Knot
) -> None:
    """The one difference with Knot 3.2 (mod-cookies): it answers FORMERR without a cookie to a query
    without a question; RFC 7873 5.4 (and BIND) answer NOERROR with the server cookie, as gslbd does."""
    at_knot = dns.query.udp(learning_query(CLIENT), "127.0.0.1", port=knot.port, timeout=3)
    assert at_knot.rcode() == dns.rcode.FORMERR and not at_knot.options
    here = dns.query.udp(learning_query(CLIENT), "127.0.0.1", port=gslbd.port, timeout=3)
    assert here.rcode() == dns.rcode.NOERROR and cookie_of(here)[:8] == CLIENT
