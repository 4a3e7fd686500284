"""Talking DNS to a peer's nameserver over UDP: one connected socket with queries matched by ID (SOA
queries of the exchange zones, NOTIFY), and the signing and checking every exchange message shares
(per-name polls go over TCP: pipeline.py). Nothing here blocks the event loop: sends are non-blocking
datagrams, replies arrive through the protocol callback, and a query that gets no reply within its
timeout fails on its own."""

from __future__ import annotations

import asyncio
import random
import socket
from typing import cast

from gslbd.exchange.wireformat import BadReply, Question, Reply, read_reply
from gslbd.model.config import ListenAddress
from gslbd.model.tsig import TsigKey
from gslbd.wire.tsig import TsigRefused, signed_query, verify_reply


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class UdpChannel(asyncio.DatagramProtocol):
    """A UDP socket connected to one nameserver (so the kernel drops datagrams from anyone else);
    queries are matched to replies by ID."""

    def __init__(self, server: ListenAddress, rng: random.Random) -> None:
        self.server = server
        self._rng = rng
        self._transport: asyncio.DatagramTransport | None = None
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._next = rng.randrange(65536)
        self._error: OSError | None = None

    @classmethod
    async def open(
        cls, server: ListenAddress, rng: random.Random, local_host: str | None = None
    ) -> UdpChannel:
        """A channel to `server`, sending from `local_host` (any address when None). OSError when the
        socket cannot be made."""
        loop = asyncio.get_running_loop()
        local = (local_host, 0) if local_host is not None else None
        _, protocol = await loop.create_datagram_endpoint(
            lambda: cls(server, rng),
            local_addr=local,
            remote_addr=(server.host, server.port),
            family=_family(server.host),
        )
        return protocol

    # asyncio.DatagramProtocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's UDP transport does not derive from asyncio.DatagramTransport; it has the same API.
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        if len(data) < 2:
            return
        future = self._pending.get(int.from_bytes(data[:2], "big"))
        if future is not None and not future.done():
            future.set_result(data)

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable and the like: fail every query in flight now instead of at its timeout.
        err = exc if isinstance(exc, OSError) else OSError(str(exc))
        for future in self._pending.values():
            if not future.done():
                future.set_exception(err)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        for future in self._pending.values():
            if not future.done():
                future.set_exception(OSError("the socket was closed"))

    # queries

    def _new_id(self) -> int:
        for _ in range(65536):
            qid = self._next
            self._next = (self._next + 1) & 0xFFFF
            if qid not in self._pending:
                return qid
        raise OSError("no free query ID")

    async def exchange(self, message: bytes, qid: int, timeout: float) -> bytes:
        """Send a message with ID `qid` and return the first datagram with that ID (unchecked).
        TimeoutError or OSError when none comes."""
        transport = self._transport
        if transport is None:
            raise OSError("the socket is closed")
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[qid] = future
        try:
            transport.sendto(message)
            async with asyncio.timeout(timeout):
                return await future
        finally:
            del self._pending[qid]

    def new_id(self) -> int:
        """A query ID not in flight on this channel."""
        return self._new_id()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None


def sign(wire: bytes, key: TsigKey | None) -> tuple[bytes, bytes]:
    """(the message to send, its TSIG MAC): signed with `key`, or as it is (MAC b"") without one."""
    if key is None:
        return wire, b""
    return signed_query(wire, key)


def checked(data: bytes, q: Question, qid: int, key: TsigKey | None, mac: bytes) -> Reply:
    """Read a reply to `q` sent with ID `qid`; with `key`, its signature must verify against the
    query's `mac`. BadReply when it is not a reply to `q` or is not signed as it must be."""
    reply = read_reply(data, q, qid)
    problem = signature_problem(data, key, mac)
    if problem:
        raise BadReply(problem)
    return reply


def signature_problem(data: bytes, key: TsigKey | None, mac: bytes) -> str:
    """'' when the reply is signed as it must be (always '' without a key), else why not."""
    if key is None:
        return ""
    try:
        verify_reply(data, key, mac)
    except TsigRefused as exc:
        return f"TSIG: {exc.reason}"
    except Exception as exc:  # dnspython's errors for a reply it cannot parse
        return f"TSIG: the reply cannot be read ({exc})"
    return ""
