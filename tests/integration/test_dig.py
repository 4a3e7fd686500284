"""The same promises seen through the `dig` binary, parsing its output as a user reads it."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

import pytest
from dns_config import BIG_COUNT, ZONE
from gslbd_harness import Running

pytestmark = pytest.mark.skipif(shutil.which("dig") is None, reason="dig is not installed (package dnsutils)")


@dataclass(frozen=True)
class DigOutput:
    text: str

    @property
    def status(self) -> str:
        found = re.search(r"status: (\w+)", self.text)
        assert found, self.text
        return found.group(1)

    @property
    def flags(self) -> set[str]:
        found = re.search(r";; flags: ([a-z ]*);", self.text)
        assert found, self.text
        return set(found.group(1).split())

    def section(self, name: str) -> list[list[str]]:
        """The records of ';; <NAME> SECTION:' as lists of fields (owner, ttl, class, type, rdata...)."""
        found = re.search(rf";; {name} SECTION:\n(.*?)(?:\n\n|\Z)", self.text, re.S)
        if not found:
            return []
        return [line.split() for line in found.group(1).splitlines() if line and not line.startswith(";")]

    @property
    def answer(self) -> list[list[str]]:
        return self.section("ANSWER")


def dig(server: Running, *args: str, host: str | None = None) -> DigOutput:
    return DigOutput(server.dig(*args, host=host))


def test_dig_sees_an_authoritative_answer_without_recursion(server: Running) -> None:
    out = dig(server, f"app.{ZONE}", "A")
    assert out.status == "NOERROR"
    assert "aa" in out.flags
    assert "ra" not in out.flags
    assert sorted(r[4] for r in out.answer) == ["192.0.2.1", "192.0.2.2"]
    assert {r[1] for r in out.answer} == {"20"}


def test_dig_nodata_and_nxdomain_carry_the_soa(server: Running) -> None:
    nodata = dig(server, f"app.{ZONE}", "MX")
    assert nodata.status == "NOERROR"
    assert nodata.answer == []
    assert [r[3] for r in nodata.section("AUTHORITY")] == ["SOA"]
    nx = dig(server, f"nope.{ZONE}", "A")
    assert nx.status == "NXDOMAIN"
    # min(SOA TTL 30, MINIMUM 45): RFC 2308 section 3
    assert [(r[0], r[1], r[3]) for r in nx.section("AUTHORITY")] == [(ZONE, "30", "SOA")]


def test_dig_retries_over_tcp_after_a_truncated_udp_answer(server: Running) -> None:
    out = dig(server, "+bufsize=512", f"big.{ZONE}", "AAAA")
    assert ";; Truncated, retrying in TCP mode." in out.text
    assert len(out.answer) == BIG_COUNT
    assert "(TCP)" in out.text


def test_dig_ignoring_truncation_shows_the_tc_flag(server: Running) -> None:
    out = dig(server, "+ignore", "+bufsize=512", f"big.{ZONE}", "AAAA")
    assert "tc" in out.flags


def test_dig_sees_the_ecs_scope(server: Running) -> None:
    geo = dig(server, "+subnet=10.2.0.0/16", f"geo.{ZONE}", "A")
    assert "CLIENT-SUBNET: 10.2.0.0/16/16" in geo.text
    assert [r[4] for r in geo.answer] == ["198.51.100.32"]
    rr = dig(server, "+subnet=10.2.0.0/16", f"app.{ZONE}", "A")
    assert "CLIENT-SUBNET: 10.2.0.0/16/0" in rr.text


def test_dig_edns_version_1_gets_badvers(server: Running) -> None:
    out = dig(server, "+edns=1", "+noednsnegotiation", f"app.{ZONE}", "A")
    assert out.status == "BADVERS"


def test_dig_any_is_minimal(server: Running) -> None:
    out = dig(server, f"dual.{ZONE}", "ANY")
    assert out.status == "NOERROR"
    assert len({r[3] for r in out.answer}) == 1


def test_dig_over_tcp_and_over_ipv6(server: Running) -> None:
    out = dig(server, "+tcp", f"dual.{ZONE}", "AAAA")
    assert [r[4] for r in out.answer] == ["2001:db8::10"]
    if "::1" not in server.hosts:
        pytest.skip("no ::1 on this machine")
    for transport in ("+notcp", "+tcp"):
        v6 = dig(server, transport, f"dual.{ZONE}", "A", host="::1")
        assert [r[4] for r in v6.answer] == ["192.0.2.10"]
        assert "aa" in v6.flags


def test_dig_refused_outside_the_zones_and_for_axfr(server: Running) -> None:
    assert dig(server, "example.org.", "A").status == "REFUSED"
    axfr = server.dig(ZONE, "AXFR")
    assert "Transfer failed." in axfr or "REFUSED" in axfr
