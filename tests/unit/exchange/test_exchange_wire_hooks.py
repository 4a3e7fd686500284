"""The wire layer's exchange hooks: answering NOTIFY, and refreshing the heartbeat by an update of the
table that recompiles only the heartbeat and answers exactly like a full rebuild."""

from __future__ import annotations

import ipaddress
import random
from dataclasses import replace

import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdatatype
from exchange_support import config, env

from gslbd.exchange.site import source_address
from gslbd.exchange.wireformat import notify_message, question, with_id
from gslbd.server.build import AnswerBuilder, compile_answers
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder

PEER_IP = int(ipaddress.IPv4Address("127.0.0.3"))


def responder(snapshot: Snapshot | None = None) -> Responder:
    cfg = config()
    view, table = compile_answers(cfg, snapshot or Snapshot(), env(cfg))
    return Responder(table, view, random.Random(1))


def test_notify_from_an_accepted_source_gets_noerror_aa_and_the_question_back() -> None:
    seen: list[tuple[str, int, bool]] = []
    r = responder()
    r.on_notify = lambda zone, ip, v6: seen.append((zone, ip, v6)) or True
    reply = dns.message.from_wire(r.handle(notify_message("gslb.test.", 99), PEER_IP, False) or b"")
    assert (reply.id, reply.opcode(), reply.rcode()) == (99, dns.opcode.NOTIFY, dns.rcode.NOERROR)
    assert reply.flags & dns.flags.AA and reply.flags & dns.flags.QR
    assert [(q.name.to_text(), q.rdtype) for q in reply.question] == [("gslb.test.", dns.rdatatype.SOA)]
    assert seen == [("gslb.test.", PEER_IP, False)]


def test_notify_the_hook_refuses_gets_refused_without_aa() -> None:
    r = responder()
    r.on_notify = lambda zone, ip, v6: False
    reply = dns.message.from_wire(r.handle(notify_message("gslb.test.", 7), PEER_IP, False) or b"")
    assert (reply.opcode(), reply.rcode()) == (dns.opcode.NOTIFY, dns.rcode.REFUSED)
    assert not reply.flags & dns.flags.AA


def test_notify_for_a_zone_not_served_is_refused_and_still_shown_to_the_hook() -> None:
    seen: list[str] = []
    r = responder()
    r.on_notify = lambda zone, ip, v6: seen.append(zone) or True
    reply = dns.message.from_wire(r.handle(notify_message("other.test.", 7), PEER_IP, False) or b"")
    assert reply.rcode() == dns.rcode.REFUSED
    assert seen == [""]


def test_without_a_hook_notify_is_not_implemented() -> None:
    reply = dns.message.from_wire(responder().handle(notify_message("gslb.test.", 7), PEER_IP, False) or b"")
    assert reply.rcode() == dns.rcode.NOTIMP


def test_ipv4_mapped_sources_are_seen_as_ipv4() -> None:
    mapped = int(ipaddress.IPv6Address("::ffff:127.0.0.3"))
    assert source_address(mapped, True) == "127.0.0.3"
    assert source_address(PEER_IP, False) == "127.0.0.3"
    assert source_address(1, True) == "::1"


def test_a_heartbeat_update_recompiles_only_the_heartbeat_and_answers_like_a_full_rebuild() -> None:
    cfg = config()
    policy_env = env(cfg)
    old = Snapshot(version=3, evaluated_at=1_700_000_000.0)
    new = replace(old, evaluated_at=1_700_000_042.5)
    builder = AnswerBuilder()
    view, table = builder.build(cfg, old, policy_env)
    patched_view, patched_table = builder.build(cfg, new, policy_env)
    assert not builder.last_full
    different = [key for key, node in patched_table.names.items() if table.names[key] is not node]
    assert different == [b"\x0cheartbeat-eu\x04gslb\x04test\x00"]
    full_view, full_table = compile_answers(cfg, new, env(cfg))
    patched = Responder(patched_table, patched_view, random.Random(1))
    full = Responder(full_table, full_view, random.Random(1))
    for name, rdtype in [
        ("heartbeat-eu.gslb.test.", 16),
        ("heartbeat-eu.gslb.test.", 1),
        ("localtargets-app.gslb.test.", 1),
        ("app.gslb.test.", 1),
        ("nothing.gslb.test.", 1),
    ]:
        wire = with_id(question(name, rdtype), 5)
        assert patched.handle(wire, 1, False) == full.handle(wire, 1, False), name
        assert patched.view.resolve(name, "TXT", 0, False, random.Random(1), 0) == full.view.resolve(
            name, "TXT", 0, False, random.Random(1), 0
        )
    answer = dns.message.from_wire(
        patched.handle(with_id(question("heartbeat-eu.gslb.test.", 16), 5), 1, False) or b""
    )
    assert answer.answer[0].to_text() == 'heartbeat-eu.gslb.test. 0 IN TXT "1700000042"'
    # The old table is untouched: a query that already holds it still sees the old heartbeat.
    before = Responder(table, view, random.Random(1)).handle(
        with_id(question("heartbeat-eu.gslb.test.", 16), 5), 1, False
    )
    assert b"1700000000" in (before or b"")
