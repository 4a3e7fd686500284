"""A site's exchange zone on the wire: the responder's hook answering SOA, AXFR and IXFR (checked with
dnspython, signatures included), the transfer reader that peers use, and NOTIFY carrying the serial."""

from __future__ import annotations

import asyncio
import ipaddress
import random

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.tsigkeyring
import pytest
from exchange_support import config, env

from gslbd.answer.exchange_names import published
from gslbd.errors import ConfigError
from gslbd.exchange import xfrwire
from gslbd.exchange.notify import Notifier
from gslbd.exchange.poller import _Poll, _poll_zone
from gslbd.exchange.transport import sign
from gslbd.exchange.wireformat import notify_message
from gslbd.exchange.xfrclient import NoChannel, TransferFailed, ZoneCopy, _Builder, read_soa_reply
from gslbd.exchange.xfrserve import ExchangeZones
from gslbd.exchange.xfrwire import AXFR, IXFR, StreamVerifier, notify_with_serial, soa_query, transfer_query
from gslbd.model.config import Config, ListenAddress, PeerSite
from gslbd.model.tsig import TsigKey
from gslbd.server.build import compile_answers
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder
from gslbd.wire.transfer import Framed

SECRET = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
KEY = TsigKey("gslb-exchange.", SECRET)
RING = dns.tsigkeyring.from_text({"gslb-exchange.": SECRET})
PEERS = (
    "  interval: 5s\n  stale_after: 30s\n  timeout: 1s\n  sites:\n"
    '    - {name: us, nameservers: ["127.0.0.3:5300"]}\n'
    '    - {name: ap, nameservers: ["127.0.0.4:5300"]}\n'
)
TSIG = f"  tsig: {{name: gslb-exchange, secret: {SECRET}}}\n"
PEER = int(ipaddress.IPv4Address("127.0.0.3"))
STRANGER = int(ipaddress.IPv4Address("127.0.0.1"))
APEX = "_gslbd-exchange-eu.gslb.test."
ZONE = "gslb.test."
T0 = 1_700_000_000.0
Serials = list[tuple[str, str, int]]


def site(peers: str = PEERS) -> tuple[Responder, ExchangeZones, Config, Serials]:
    cfg = config(peers=peers)
    snapshot = Snapshot(evaluated_at=T0)
    view, table = compile_answers(cfg, snapshot, env(cfg))
    responder = Responder(table, view, random.Random(1))
    seen: Serials = []
    zones = ExchangeZones(cfg, published(cfg, snapshot), T0, lambda *a: seen.append(a))
    responder.on_exchange = zones.handle
    return responder, zones, cfg, seen


def frames(data: bytes) -> list[bytes]:
    assert isinstance(data, Framed)
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 2], "big")
        out.append(data[pos + 2 : pos + 2 + size])
        pos += 2 + size
    return out


def read(builder: _Builder, data: bytes, qid: int, verifier: StreamVerifier | None = None) -> ZoneCopy:
    for message in frames(data):
        builder.feed(message, qid, verifier)
    assert builder.done
    return builder.result()


def test_the_apex_soa_is_answered_to_anyone_with_the_heartbeat() -> None:
    responder, zones, _, _ = site()
    reply = dns.message.from_wire(responder.handle(soa_query(APEX, 5), STRANGER, False) or b"")
    assert reply.rcode() == dns.rcode.NOERROR and reply.flags & dns.flags.AA
    assert reply.answer[0].rdtype == dns.rdatatype.SOA and reply.answer[0][0].serial == zones.serial(ZONE)
    assert [(r.name.to_text(), r[0].to_text()) for r in reply.additional] == [
        ("heartbeat-eu.gslb.test.", f'"{int(T0)}"')
    ]
    data = responder.handle(soa_query(APEX, 5), STRANGER, False) or b""
    assert read_soa_reply(data, 5, APEX, "heartbeat-eu.gslb.test.", None, b"") == (zones.serial(ZONE), T0)


@pytest.mark.parametrize("padding", [0, 200])
def test_a_question_whose_root_is_a_pointer_gets_its_question_written_again(padding: int) -> None:
    # issue 19: the root label as `c0 06` (ANCOUNT's zero byte); EDNS padding made the old raw copy long.
    responder, _, _, _ = site()
    plain = soa_query(APEX, 9)
    query = plain[:10] + b"\x00\x01" + plain[12:-5] + b"\xc0\x06" + plain[-4:]
    query += b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00" + (padding + 4).to_bytes(2, "big")
    query += b"\x00\x0c" + padding.to_bytes(2, "big") + bytes(padding)
    assert dns.message.from_wire(query).question[0].name.to_text() == APEX
    reply = dns.message.from_wire(responder.handle(query, STRANGER, False) or b"")
    assert reply.rcode() == dns.rcode.NOERROR and [q.name.to_text() for q in reply.question] == [APEX]
    assert reply.answer[0].rdtype == dns.rdatatype.SOA and reply.answer[0].name.to_text() == APEX


def test_axfr_from_a_peer_over_tcp_is_the_sites_own_publication() -> None:
    responder, _, _, _ = site()
    data = responder.handle(transfer_query(APEX, AXFR, 6), PEER, False, True) or b""
    records = [
        (rrset.name.to_text(), dns.rdatatype.to_text(rrset.rdtype), rd.to_text())
        for message in frames(data)
        for rrset in dns.message.from_wire(message, xfr=True).answer
        for rd in rrset
    ]
    assert ("app." + APEX, "A", "192.0.2.1") in records and ("app." + APEX, "AAAA", "2001:db8::1") in records
    assert ("web." + APEX, "A", "192.0.2.2") in records
    assert not any(data == "192.0.2.3" for _, _, data in records)  # admin down: not published
    assert not any(data == "198.51.100.1" for _, _, data in records)  # us's endpoint: not eu's to publish
    copy = read(_Builder(APEX, ZONE, None), data, 6)
    assert copy.targets == {"app.gslb.test.": ("192.0.2.1", "2001:db8::1"), "web.gslb.test.": ("192.0.2.2",)}


@pytest.mark.parametrize(("source", "tcp"), [(STRANGER, True), (PEER, False)])
def test_axfr_from_a_non_peer_or_over_udp_is_refused(source: int, tcp: bool) -> None:
    responder, _, _, _ = site()
    reply = dns.message.from_wire(responder.handle(transfer_query(APEX, AXFR, 6), source, False, tcp) or b"")
    assert reply.rcode() == dns.rcode.REFUSED and not reply.answer


def test_ixfr_over_udp_gets_the_soa_alone() -> None:
    responder, zones, _, _ = site()
    data = responder.handle(transfer_query(APEX, IXFR, 6, 1), PEER, False, False) or b""
    reply = dns.message.from_wire(data)
    assert [(r.rdtype, r[0].serial) for r in reply.answer] == [(dns.rdatatype.SOA, zones.serial(ZONE))]


def test_ixfr_sends_the_difference_and_the_reader_applies_it() -> None:
    responder, zones, _, _ = site()
    copy = read(
        _Builder(APEX, ZONE, None),
        responder.handle(transfer_query(APEX, AXFR, 1), PEER, False, True) or b"",
        1,
    )
    publication = {ZONE: {"localtargets-app.gslb.test.": ("192.0.2.1", "192.0.2.5")}}
    zones.update(publication, [ZONE], T0 + 1)  # web gone, app's IPv6 gone, app has a new IPv4
    data = responder.handle(transfer_query(APEX, IXFR, 2, copy.serial), PEER, False, True) or b""
    builder = _Builder(APEX, ZONE, copy)
    new = read(builder, data, 2)
    assert builder.kind == "ixfr" and new.serial == zones.serial(ZONE)
    assert new.targets == {"app.gslb.test.": ("192.0.2.1", "192.0.2.5")}
    current = responder.handle(transfer_query(APEX, IXFR, 3, new.serial), PEER, False, True) or b""
    builder = _Builder(APEX, ZONE, new)
    assert read(builder, current, 3) is new and builder.kind == "current"
    stale = ZoneCopy(ZONE, 42, {}, {"gone.gslb.test.": ("192.0.2.99",)})
    full = responder.handle(transfer_query(APEX, IXFR, 4, 42), PEER, False, True) or b""
    builder = _Builder(APEX, ZONE, stale)
    assert read(builder, full, 4).targets == new.targets and builder.kind == "axfr"


def signed_transfer(responder: Responder, rtype: int, serial: int | None = None) -> tuple[bytes, bytes]:
    wire, mac = sign(transfer_query(APEX, rtype, 9, serial), KEY)
    return responder.handle(wire, PEER, False, True) or b"", mac


def test_with_a_key_an_unsigned_transfer_is_refused_and_a_signed_stream_verifies_message_by_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(xfrwire, "MESSAGE_TARGET", 40)  # one record or two per message
    responder, _, _, _ = site(PEERS + TSIG)
    unsigned = dns.message.from_wire(
        responder.handle(transfer_query(APEX, AXFR, 6), PEER, False, True) or b""
    )
    assert unsigned.rcode() == dns.rcode.REFUSED
    data, mac = signed_transfer(responder, AXFR)
    messages = frames(data)
    assert len(messages) > 3
    ctx = None
    for message in messages:  # dnspython checks each signature and the chain of MACs
        parsed = dns.message.from_wire(
            message,
            keyring=RING,
            request_mac=mac,
            xfr=True,
            origin=dns.name.from_text(APEX),
            tsig_ctx=ctx,
            multi=True,
        )
        assert parsed.had_tsig
        ctx = parsed.tsig_ctx
    copy = read(_Builder(APEX, ZONE, None), data, 9, StreamVerifier(KEY, mac))
    assert copy.targets["web.gslb.test."] == ("192.0.2.2",)
    tampered = bytearray(messages[2])
    tampered[-40] ^= 1  # inside the MAC
    builder = _Builder(APEX, ZONE, None)
    verifier = StreamVerifier(KEY, mac)
    builder.feed(messages[0], 9, verifier)
    builder.feed(messages[1], 9, verifier)
    with pytest.raises(TransferFailed) as failed:
        builder.feed(bytes(tampered), 9, verifier)
    assert failed.value.tsig


def test_the_soa_reply_says_when_the_peer_offers_no_exchange_zone() -> None:
    responder, _, _, _ = site("")  # no peers: no exchange zones; the zone answers NXDOMAIN
    responder.on_exchange = None
    data = responder.handle(soa_query(APEX, 5), PEER, False) or b""
    with pytest.raises(NoChannel):
        read_soa_reply(data, 5, APEX, "heartbeat-eu.gslb.test.", None, b"")
    refused = responder.handle(soa_query("_gslbd-exchange-eu.other.test.", 5), PEER, False) or b""
    with pytest.raises(NoChannel):
        read_soa_reply(refused, 5, "_gslbd-exchange-eu.other.test.", "heartbeat-eu.other.test.", None, b"")


def test_a_notify_from_a_peer_hands_over_the_serial_it_carries() -> None:
    responder, _, _, seen = site()
    carried = notify_with_serial(ZONE, 3, "_gslbd-exchange-us.gslb.test.", 4242)
    responder.on_notify = lambda zone, ip, v6: True
    reply = dns.message.from_wire(responder.handle(carried, PEER, False) or b"")
    assert reply.rcode() == dns.rcode.NOERROR  # answered by the NOTIFY hook as ever
    assert seen == [("us", ZONE, 4242)]
    responder.handle(carried, STRANGER, False)  # not a peer's address
    responder.handle(notify_with_serial(ZONE, 3, "_gslbd-exchange-ap.gslb.test.", 7), PEER, False)  # not us's
    responder.handle(notify_message(ZONE, 4), PEER, False)  # no serial
    assert seen == [("us", ZONE, 4242)]


def test_with_a_key_an_unsigned_notify_carries_no_serial() -> None:
    responder, _, _, seen = site(PEERS + TSIG)
    responder.handle(notify_with_serial(ZONE, 3, "_gslbd-exchange-us.gslb.test.", 1), PEER, False)
    signed, _ = sign(notify_with_serial(ZONE, 3, "_gslbd-exchange-us.gslb.test.", 2), KEY)
    responder.handle(signed, PEER, False)
    assert seen == [("us", ZONE, 2)]


def test_a_poll_whose_notify_carried_the_serial_it_has_asks_nothing() -> None:
    poll = _Poll(PeerSite("us"), [], 1.0, random.Random(1))  # no channel: any query would fail
    have = ZoneCopy(ZONE, 77)
    found = asyncio.run(_poll_zone(poll, PeerSite("us"), ZONE, have, 77, 1.0, random.Random(1), None))
    assert found == (None, None, "unchanged") and poll.errors == 0


def test_transfer_and_journal_are_configured_under_peers() -> None:
    cfg = config(peers=PEERS + "  transfer: false\n  journal: 5\n")
    assert cfg.peers is not None and (cfg.peers.transfer, cfg.peers.journal) == (False, 5)
    defaults = config(peers=PEERS).peers
    assert defaults is not None and (defaults.transfer, defaults.journal) == (True, 1000)
    with pytest.raises(ConfigError) as bad:
        config(peers=PEERS + "  journal: 0\n")
    assert "peers.journal" in str(bad.value), str(bad.value)


def test_an_incremental_transfer_that_breaks_off_leaves_the_copy_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    responder, zones, _, _ = site()
    copy = read(
        _Builder(APEX, ZONE, None),
        responder.handle(transfer_query(APEX, AXFR, 1), PEER, False, True) or b"",
        1,
    )
    before = (copy.serial, dict(copy.targets), {k: set(v) for k, v in copy.records.items()})
    zones.update({ZONE: {"localtargets-app.gslb.test.": ("192.0.2.5",)}}, [ZONE], T0 + 1)
    monkeypatch.setattr(xfrwire, "MESSAGE_TARGET", 40)
    messages = frames(responder.handle(transfer_query(APEX, IXFR, 2, copy.serial), PEER, False, True) or b"")
    builder = _Builder(APEX, ZONE, copy)
    for message in messages[:-1]:  # the connection closes before the last message
        builder.feed(message, 2, None)
    assert not builder.done
    assert (copy.serial, copy.targets, copy.records) == before


def test_the_notify_a_site_sends_carries_its_exchange_serial() -> None:
    cfg = config(peers=PEERS)

    async def scenario() -> bytes:
        loop = asyncio.get_running_loop()
        got: asyncio.Future[bytes] = loop.create_future()

        class Peer(asyncio.DatagramProtocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport

            def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
                reply = bytearray(data[:12])
                reply[2] |= 0x80
                self.transport.sendto(bytes(reply) + data[12:], addr)  # type: ignore[attr-defined]
                if not got.done():
                    got.set_result(data)

        transport, _ = await loop.create_datagram_endpoint(Peer, local_addr=("127.0.0.1", 0))
        port = transport.get_extra_info("sockname")[1]
        notifier = Notifier(cfg, random.Random(1))
        notifier.serial = lambda origin: 4242 if origin == ZONE else None
        notifier.send([ZONE], [ListenAddress("127.0.0.1", port)])
        try:
            return await asyncio.wait_for(got, 5)
        finally:
            await notifier.stop()
            transport.close()

    message = dns.message.from_wire(asyncio.run(scenario()))
    assert [(q.name.to_text(), q.rdtype) for q in message.question] == [(ZONE, dns.rdatatype.SOA)]
    assert [(r.name.to_text(), r[0].serial) for r in message.answer] == [(APEX, 4242)]
