"""A real server with RRL, cookies and NSID on answers ordinary queries from its C table (issue 21): the
cookie and the identity come back, the C loop answered every UDP query, and the cookie counters in
/metrics count exactly the queries that carried a cookie, whichever path answered them."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dns.edns
import dns.message
import dns.rcode
import pytest
from gslbd_harness import Running, free_port, running_gslbd

ZONE = "gslb.example.com."
CONFIG = f"""
version: 1
dns:
  listen: @LISTEN@
  rrl: {{responses_per_second: 100000, errors_per_second: 100000, nxdomains_per_second: 100000}}
  cookies: {{}}
  identity: ns-test
api: {{listen: "127.0.0.1:@API@"}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 192.0.2.53}}]
services:
  - {{name: app.{ZONE}, check: none, endpoints: [{{address: 192.0.2.1}}, {{address: 192.0.2.2}}]}}
"""
CLIENT_COOKIE = bytes.fromhex("2464c4abcf10c957")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, int]]:
    api = free_port()
    workdir: Path = tmp_path_factory.mktemp("guard")
    with running_gslbd(workdir, CONFIG.replace("@API@", str(api)), zone=ZONE) as running:
        yield running, api


def events(api: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{api}/metrics", timeout=5) as response:
        text = response.read().decode()
    prefix = "gslbd_dns_server_events_total{event="
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            name, value = line[len(prefix) :].split("} ")
            out[name.strip('"')] = out.get(name.strip('"'), 0.0) + float(value)
    return out


def option(msg: dns.message.Message, code: int) -> bytes | None:
    found = next((o for o in msg.options if o.otype == code), None)
    return None if found is None else found.to_wire()


def test_c_answers_cookie_and_nsid_queries_with_rrl_on_and_counts_exactly(
    server: tuple[Running, int],
) -> None:
    running, api = server
    before = events(api)
    names = (f"app.{ZONE}", f"nope.{ZONE}", ZONE)
    cookie: bytes = CLIENT_COOKIE
    asked = 0
    for i in range(60):
        name = names[i % 3]
        query = dns.message.make_query(name, "A" if i % 3 != 2 else "SOA", use_edns=0)
        query.use_edns(0, options=[dns.edns.GenericOption(dns.edns.COOKIE, cookie), dns.edns.NSIDOption(b"")])
        reply = running.udp(query)
        asked += 1
        assert reply.rcode() == (dns.rcode.NXDOMAIN if i % 3 == 1 else dns.rcode.NOERROR)
        assert option(reply, dns.edns.NSID) == b"ns-test"
        got = option(reply, dns.edns.COOKIE)
        assert got is not None and len(got) == 24 and got[:8] == CLIENT_COOKIE
        cookie = got  # the next query carries the server cookie: valid from then on
    after = events(api)
    queries = after["udp_queries"] - before["udp_queries"]
    assert queries == asked
    assert after["udp_native_answers"] - before["udp_native_answers"] == asked  # every one answered by C
    assert after["cookies_new"] - before.get("cookies_new", 0) == 1
    assert after["cookies_valid"] - before.get("cookies_valid", 0) == asked - 1
    assert after.get("rrl_limited", 0) == before.get("rrl_limited", 0)
