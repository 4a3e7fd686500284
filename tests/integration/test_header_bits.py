"""Header bits of a real gslbd: CD copied from the query (RFC 4035 3.1.6, genreport `docd`) on every kind
of answer and through workers (the C table answers there), and no AA on the SERVFAIL of
`all_down: servfail` (BIND logs a server that sets it as lame), with dig and dnspython."""

from __future__ import annotations

from collections.abc import Iterator

import dns.flags
import dns.message
import dns.rcode
import pytest
from gslbd_harness import Running, running_gslbd

ZONE = "bits.test."
CONFIG = f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: 0s, workers: @WORKERS@}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
    records: [{{name: info, type: TXT, value: hello}}]
services:
  - {{name: app.{ZONE}, check: none, endpoints: [{{address: 192.0.2.1}}]}}
  - name: sf.{ZONE}
    all_down: servfail
    check: none
    endpoints: [{{address: 192.0.2.2, admin: down}}]
"""


@pytest.fixture(scope="module", params=[1, 2], ids=["one-process", "two-workers"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    config = CONFIG.replace("@WORKERS@", str(request.param))
    with running_gslbd(tmp_path_factory.mktemp("bits"), config, zone=ZONE) as running:
        yield running


def ask(server: Running, name: str, rtype: str, *, cd: bool, edns: bool = False) -> dns.message.Message:
    flags = dns.flags.RD | (dns.flags.CD if cd else 0)
    query = dns.message.make_query(name, rtype, flags=flags, use_edns=0 if edns else None)
    return server.udp(query)


@pytest.mark.parametrize(
    ("name", "rtype", "rcode"),
    [
        (f"app.{ZONE}", "A", dns.rcode.NOERROR),
        (f"info.{ZONE}", "TXT", dns.rcode.NOERROR),
        (f"app.{ZONE}", "MX", dns.rcode.NOERROR),
        (f"nope.{ZONE}", "A", dns.rcode.NXDOMAIN),
        (f"sf.{ZONE}", "A", dns.rcode.SERVFAIL),
        ("www.example.net.", "A", dns.rcode.REFUSED),
    ],
)
@pytest.mark.parametrize("edns", [False, True])
def test_cd_is_copied_and_only_data_answers_have_aa(
    server: Running, name: str, rtype: str, rcode: int, edns: bool
) -> None:
    for cd in (False, True):
        for _ in range(3):  # the first answer may come from Python, later ones from the C table
            reply = ask(server, name, rtype, cd=cd, edns=edns)
            assert reply.rcode() == rcode
            assert bool(reply.flags & dns.flags.CD) == cd
            assert bool(reply.flags & dns.flags.AA) == (rcode in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN))


def test_dig_shows_cd_copied_and_servfail_without_aa(server: Running) -> None:
    out = server.dig("+cdflag", f"app.{ZONE}", "A")
    flags = next(line for line in out.splitlines() if line.startswith(";; flags:"))
    assert " cd" in flags and " aa" in flags
    out = server.dig(f"sf.{ZONE}", "A")
    assert "status: SERVFAIL" in out
    flags = next(line for line in out.splitlines() if line.startswith(";; flags:"))
    assert " aa" not in flags
