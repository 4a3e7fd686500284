"""NSID (RFC 5001) and CHAOS id.server./hostname.bind./version.bind./version.server."""

from __future__ import annotations

import random
from dataclasses import replace

import dns.edns
import dns.message
import dns.rcode
import dns.rdataclass
import pytest
from wire_support import CONFIG, ORIGIN, ask, fast_and_slow, make_view, query

from gslbd.model.config import DnsConfig
from gslbd.wire import Responder, compile_table

NSID = dns.edns.NSIDOption(b"")


def responder_with(identity: str | None, version: str | None = None, worker: int = 0) -> Responder:
    config = replace(CONFIG, dns=DnsConfig(identity=identity, version=version))
    view = make_view(config)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True, worker=worker)
    return Responder(table, view, random.Random(1))


def nsids(msg: dns.message.Message) -> list[bytes]:
    return [o.to_wire() or b"" for o in msg.options if isinstance(o, dns.edns.NSIDOption)]


def same_on_both_paths(responder: Responder, wire: bytes) -> dns.message.Message:
    return dns.message.from_wire(fast_and_slow(responder, wire))


@pytest.mark.parametrize("name", [f"app.{ORIGIN}", f"nope.{ORIGIN}", "www.example.net.", f"sf.{ORIGIN}"])
def test_nsid_is_sent_when_asked_on_the_fast_path(name: str) -> None:
    responder = responder_with("ns1-w{worker}", worker=3)
    msg = same_on_both_paths(responder, query(name, options=(NSID,), ecs="198.51.100.0/24"))
    assert nsids(msg) == [b"ns1-w3"]
    assert [o.otype for o in msg.options][:2] == [dns.edns.ECS, dns.edns.NSID]
    fresh = responder_with("ns1-w{worker}", worker=3)  # its policy counters start again at 0
    assert nsids(same_on_both_paths(fresh, query(name, edns=0))) == []


def test_no_nsid_without_an_identity() -> None:
    assert nsids(same_on_both_paths(responder_with(None), query(f"app.{ORIGIN}", options=(NSID,)))) == []


def chaos(responder: Responder, name: str, rtype: str = "TXT") -> dns.message.Message:
    return ask(responder, query(name, rtype, rdclass=dns.rdataclass.CH))


@pytest.mark.parametrize("name", ["id.server.", "HOSTNAME.bind."])
def test_chaos_identity_names_answer_the_identity(name: str) -> None:
    msg = chaos(responder_with("ns1-w{worker}", worker=2), name)
    assert msg.rcode() == dns.rcode.NOERROR
    assert [r.to_text() for r in msg.answer] == [f'{name} 0 CH TXT "ns1-w2"']


@pytest.mark.parametrize("name", ["version.bind.", "version.server."])
def test_chaos_version_names_answer_the_version_or_are_refused(name: str) -> None:
    msg = chaos(responder_with(None, 'gslbd "1.0"'), name)
    assert [r.to_text() for r in msg.answer] == [f'{name} 0 CH TXT "gslbd \\"1.0\\""']
    hidden = chaos(responder_with("ns1"), name)
    assert hidden.rcode() == dns.rcode.REFUSED and hidden.answer == []


def test_chaos_is_refused_when_nothing_is_configured() -> None:
    for name in ("id.server.", "hostname.bind.", "version.bind.", "version.server.", "authors.bind."):
        assert chaos(responder_with(None), name).rcode() == dns.rcode.REFUSED


def test_other_chaos_types_at_identity_names_are_nodata() -> None:
    msg = chaos(responder_with("ns1"), "id.server.", "A")
    assert msg.rcode() == dns.rcode.NOERROR and msg.answer == []
