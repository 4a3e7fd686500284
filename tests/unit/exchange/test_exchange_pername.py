"""Per-name polling over pipelined TCP (exchange/pername.py, pipeline.py) against a small fake peer on
127.0.0.1: every question over one connection kept across polls, replies matched in any order, a peer
that stops answering, a poll that misses its deadline (an error in the metric and in the peer's state),
the window sized by the round trip; NOTIFY failures named by rcode, and NOTIFY while a site starts."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from exchange_support import SERVICES, config

from gslbd.app.core import App
from gslbd.clock import FakeClock
from gslbd.exchange.notify import _check_reply
from gslbd.exchange.pername import Pipes, PollFailed, Tally, build_questions, poll_names
from gslbd.exchange.pipeline import MAX_WINDOW, MIN_WINDOW, window_for
from gslbd.exchange.poller import Poller, deadline
from gslbd.exchange.site import Exchange
from gslbd.exchange.wireformat import notify_message
from gslbd.metrics import REGISTRY
from gslbd.model.config import Config, PeerSite

NOTIFY_RECEIVED_TOTAL = "gslbd_exchange_notify_received_total"
QUERY_ERRORS_TOTAL = "gslbd_exchange_peer_query_errors_total"
Answer = Callable[[dns.message.Message], dns.message.Message | None]


def address(service: str) -> str:
    """The address the fake peer publishes for `service` (its first label)."""
    return f"198.51.100.{sum(service.encode()) % 250 + 1}"


def published(query: dns.message.Message) -> dns.message.Message | None:
    """What a peer publishing 198.51.100.<n> for every localtargets name answers (TXT: a heartbeat)."""
    reply = dns.message.make_response(query)
    q = query.question[0]
    if q.rdtype == dns.rdatatype.TXT:
        reply.answer.append(dns.rrset.from_text(q.name, 0, "IN", "TXT", '"1700000000"'))
    elif q.rdtype == dns.rdatatype.A:
        reply.answer.append(
            dns.rrset.from_text(q.name, 5, "IN", "A", address(q.name.labels[0].decode()[13:]))
        )
    return reply  # AAAA: NODATA


class FakePeer(asyncio.Protocol):
    """One connection of the fake peer: answers each chunk's queries, in reverse order when `reverse`,
    one every `spacing` seconds when set."""

    def __init__(self, peer: FakePeers) -> None:
        self.peer = peer
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.peer.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buf += data
        replies: list[bytes] = []
        while len(self.buf) >= 2 and len(self.buf) - 2 >= (size := int.from_bytes(self.buf[:2], "big")):
            query = dns.message.from_wire(bytes(self.buf[2 : 2 + size]))
            del self.buf[: 2 + size]
            self.peer.asked += 1
            reply = self.peer.answer(query)
            if reply is not None:
                wire = reply.to_wire()
                replies.append(len(wire).to_bytes(2, "big") + wire)
        self.peer.biggest_chunk = max(self.peer.biggest_chunk, len(replies))
        if self.peer.reverse:
            replies.reverse()
        loop = asyncio.get_running_loop()
        for wire in replies:
            if self.peer.spacing:
                self.peer.queued += 1
                loop.call_later(self.peer.spacing * self.peer.queued, self._send, wire)
            else:
                self._send(wire)

    def _send(self, wire: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(wire)


class FakePeers:
    def __init__(self, answer: Answer = published, reverse: bool = False, spacing: float = 0.0) -> None:
        self.answer = answer
        self.reverse = reverse
        self.spacing = spacing
        self.connections = 0
        self.asked = 0
        self.queued = 0
        self.biggest_chunk = 0


@asynccontextmanager
async def fake_peer(peer: FakePeers, host: str = "127.0.0.1") -> AsyncIterator[int]:
    server = await asyncio.get_running_loop().create_server(lambda: FakePeer(peer), host, 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def peer_config(port: int, interval: str = "5s", timeout: str = "1s", services: int = 0) -> Config:
    """Site eu with peer us at 127.0.0.1:`port` (and `services` more services s0, s1, ...)."""
    more = "".join(
        f"  - {{name: s{n}, endpoints: [{{address: 192.0.2.{n + 10}, site: eu}}]}}\n" for n in range(services)
    )
    peers = (
        f"  interval: {interval}\n  stale_after: 30s\n  timeout: {timeout}\n  transfer: false\n"
        f'  sites:\n    - {{name: us, nameservers: ["127.0.0.1:{port}"]}}\n'
    )
    return config(services=SERVICES + more, peers=peers)


def test_a_poll_asks_every_question_over_one_pipelined_connection_kept_for_the_next() -> None:
    async def run() -> tuple[dict[str, tuple[str, ...]], float | None, FakePeers, Tally]:
        peer = FakePeers()
        async with fake_peer(peer) as port:
            cfg = peer_config(port)
            pipes, tally = Pipes(random.Random(1)), Tally()
            site = cfg.peers.sites[0] if cfg.peers is not None else PeerSite("us")
            first = await poll_names(pipes, site, build_questions(cfg), tally, timeout=1.0, interval=5.0)
            await poll_names(pipes, site, build_questions(cfg), tally, timeout=1.0, interval=5.0)
            pipes.close()
            return dict(first.targets), first.heartbeat, peer, tally

    targets, heartbeat, peer, tally = asyncio.run(run())
    assert targets == {"app.gslb.test.": (address("app"),), "web.gslb.test.": (address("web"),)}
    assert heartbeat == 1_700_000_000.0
    assert peer.connections == 1  # both polls over the same connection
    assert peer.asked == 2 * 5  # heartbeat + A and AAAA of two services, twice
    assert peer.biggest_chunk == 4  # the four questions after the heartbeat were sent at once
    assert tally.errors == 0


def test_replies_in_another_order_are_matched_to_their_questions_by_id() -> None:
    async def run() -> dict[str, tuple[str, ...]]:
        async with fake_peer(FakePeers(reverse=True)) as port:
            cfg = peer_config(port)
            pipes = Pipes(random.Random(2))
            site = cfg.peers.sites[0] if cfg.peers is not None else PeerSite("us")
            answer = await poll_names(pipes, site, build_questions(cfg), Tally(), timeout=1.0, interval=5.0)
            pipes.close()
            return dict(answer.targets)

    assert asyncio.run(run()) == {"app.gslb.test.": (address("app"),), "web.gslb.test.": (address("web"),)}


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback")
def test_each_nameserver_is_reached_from_this_sites_address_of_its_own_family() -> None:
    async def run() -> tuple[str, int]:
        with socket.socket() as closed:  # a port where nothing listens: the first nameserver refuses
            closed.bind(("127.0.0.1", 0))
            dead = closed.getsockname()[1]
        async with fake_peer(FakePeers(), "::1") as port:
            peers = (
                "  interval: 5s\n  stale_after: 30s\n  timeout: 1s\n  transfer: false\n  sites:\n"
                f'    - {{name: us, nameservers: ["127.0.0.1:{dead}", "[::1]:{port}"]}}\n'
            )
            cfg = config(peers=peers)  # listens on 127.0.0.1: IPv4 is sent from there, IPv6 from any
            poller = Poller(cfg, FakeClock(), random.Random(7), lambda: None)
            site = cfg.peers.sites[0] if cfg.peers is not None else PeerSite("us")
            await poller._poll_names(site, 1.0, 5.0, None)
            await poller.stop()
            state = poller.book.state("us")
            assert state is not None
            return state.nameserver, state.errors

    nameserver, errors = asyncio.run(run())
    assert nameserver.startswith("[::1]:")
    assert errors == 1  # the refused connection to the first nameserver


def test_a_peer_that_stops_answering_fails_the_poll_after_the_timeout_counting_each_question() -> None:
    def heartbeat_only(query: dns.message.Message) -> dns.message.Message | None:
        return published(query) if query.question[0].rdtype == dns.rdatatype.TXT else None

    async def run() -> tuple[str, Tally, int]:
        peer = FakePeers(heartbeat_only)
        async with fake_peer(peer) as port:
            cfg = peer_config(port, timeout="100ms")
            pipes, tally = Pipes(random.Random(3)), Tally()
            site = cfg.peers.sites[0] if cfg.peers is not None else PeerSite("us")
            with pytest.raises(PollFailed) as failed:
                await poll_names(pipes, site, build_questions(cfg), tally, timeout=0.1, interval=5.0)
            pipes.close()
            return str(failed.value), tally, peer.connections

    why, tally, connections = asyncio.run(run())
    assert why.endswith("from 127.0.0.1:" + why.rsplit(":", 2)[1] + ": timeout after 0.1s")
    assert tally.errors == 2 * 4  # four questions, asked twice (a new connection the second time)
    assert connections == 2


def test_a_poll_that_misses_its_deadline_is_an_error_in_the_metric_and_the_peer_state() -> None:
    async def run(cfg: Config) -> Poller:
        poller = Poller(cfg, FakeClock(), random.Random(4), lambda: None)
        site = cfg.peers.sites[0] if cfg.peers is not None else PeerSite("us")
        # the peer answers every query, but one per 50 ms: steady progress, never within the deadline
        await poller._poll_names(site, 0.2, 0.3, None)
        await poller.stop()
        return poller

    async def with_peer() -> tuple[Poller, float]:
        async with fake_peer(FakePeers(spacing=0.05)) as port:
            cfg = peer_config(port, interval="300ms", timeout="200ms", services=20)
            before = (
                REGISTRY.get_sample_value("gslbd_exchange_peer_query_errors_total", {"peer": "us"}) or 0.0
            )
            poller = await run(cfg)
            after = REGISTRY.get_sample_value("gslbd_exchange_peer_query_errors_total", {"peer": "us"}) or 0.0
            return poller, after - before

    poller, counted = asyncio.run(with_peer())
    state = poller.book.state("us")
    assert state is not None and state.failing
    limit = deadline(0.3, 0.2, None)  # the first poll: no RTT measured yet
    assert state.last_error == f"the poll missed its deadline of {limit:.3g}s"
    assert state.errors == 1
    assert counted == 1


def test_the_window_is_the_bandwidth_delay_product_of_a_quarter_interval() -> None:
    assert window_for(2000, 0.24, 0.5) == 960  # 2,000 questions across 240 ms in half a second
    assert window_for(2000, 0.0002, 1.25) == MIN_WINDOW == 128  # a peer next door gets few at a time
    assert window_for(200_000, 0.24, 1.25) == MAX_WINDOW
    assert deadline(5.0, 1.0, 0.24) == pytest.approx(10.96)  # two intervals plus four round trips
    assert deadline(1.0, 0.9, None) == pytest.approx(
        2.4
    )  # and 100 ms assumed per trip before one is measured
    assert deadline(1.0, 0.3, 0.002) == pytest.approx(2.008)


@pytest.mark.parametrize(("rcode", "why"), [(4, "answered NOTIMP"), (5, "answered REFUSED"), (0, "")])
def test_a_notify_answer_other_than_noerror_is_named_by_its_rcode(rcode: int, why: str) -> None:
    query = bytearray(notify_message("gslb.test.", 7))
    query[2] |= 0x80
    query[3] = (query[3] & 0xF0) | rcode
    assert _check_reply(bytes(query)) == why


def test_a_starting_site_answers_a_peers_notify_as_a_running_one_does() -> None:
    cfg = peer_config(5300)  # peer us at 127.0.0.1
    exchange = Exchange(cfg, FakeClock(), random.Random(5), on_peers=lambda: None, on_beat=lambda: None)
    accepted = REGISTRY.get_sample_value(NOTIFY_RECEIVED_TOTAL, {"result": "accepted"}) or 0.0
    refused = REGISTRY.get_sample_value(NOTIFY_RECEIVED_TOTAL, {"result": "refused"}) or 0.0
    assert exchange.notify_early("gslb.test.", 0x7F000001, False)  # a peer's nameserver: NOERROR
    assert not exchange.notify_early("gslb.test.", 0x7F000063, False)  # 127.0.0.99: REFUSED
    assert not exchange.notify_early("", 0x7F000001, False)  # a zone not served here: REFUSED
    assert REGISTRY.get_sample_value(NOTIFY_RECEIVED_TOTAL, {"result": "accepted"}) == accepted + 1
    assert REGISTRY.get_sample_value(NOTIFY_RECEIVED_TOTAL, {"result": "refused"}) == refused + 2
    # on the loop before polling starts, a peer's NOTIFY is accepted too: its first poll is about to come
    assert exchange.poller.poke("us")
    assert not exchange.poller.poke("nobody")


def test_an_app_that_has_not_started_polling_answers_a_peers_notify_by_the_same_rule() -> None:
    app = App(peer_config(5300), FakeClock(), random.Random(6))  # not started: no loop, no polls yet
    assert app._notify_hook("gslb.test.", 0x7F000001, False)  # from the peer's nameserver: NOERROR
    assert not app._notify_hook("gslb.test.", 0x7F000063, False)  # from anyone else: REFUSED
