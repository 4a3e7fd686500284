"""All the listeners of one process: UDP and TCP on every listen address.

With `dns.threads: N` each address gets N UDP sockets in one SO_REUSEPORT group, each answered by a C
loop in a thread of its own (server/udp.py), all from the one responder (table, signer, guard); TCP keeps
one socket per address, served by the event loop (docs/server.md, *Threads*)."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from gslbd.limits import ConnectionBudget
from gslbd.model.config import ListenAddress
from gslbd.server.handler import Handler
from gslbd.server.sockets import bind_tcp, bind_udp_group
from gslbd.server.stats import ServerStats
from gslbd.server.tcp import DEFAULT_BACKLOG, TcpListener
from gslbd.server.udp import UdpListener

log = logging.getLogger(__name__)

# How many ports to try for a listen address with port 0 before giving up.
ANY_PORT_ATTEMPTS = 50


@dataclass(frozen=True, slots=True)
class Bound:
    """One socket actually listening: "udp" or "tcp", and its host and port."""

    proto: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.proto}://{host}:{self.port}"


class Listeners:
    """Binds UDP and TCP on each address, answers with `handler`, closes them all on `close()`."""

    def __init__(
        self,
        addresses: Sequence[ListenAddress],
        handler: Handler,
        *,
        tcp_idle_timeout: float,
        max_tcp_connections: int | None = None,
        stats: ServerStats | None = None,
        reuse_port: bool = False,
        tcp_backlog: int = DEFAULT_BACKLOG,
        threads: int = 1,
    ) -> None:
        """`reuse_port`: share the addresses with other processes (SO_REUSEPORT), for workers.
        `threads`: UDP sockets per address (one SO_REUSEPORT group), each answered by a C loop of its own.
        `max_tcp_connections`: a budget of this many for these listeners alone (tests); by default the
        process's connection budget, derived from the open-file limit (gslbd.limits)."""
        self._addresses = tuple(addresses)
        self._reuse_port = reuse_port
        self._handler = handler
        self._idle = tcp_idle_timeout
        self._budget = ConnectionBudget(max_tcp_connections) if max_tcp_connections is not None else None
        self._backlog = tcp_backlog
        self._threads = threads
        self.stats = stats if stats is not None else ServerStats()
        self._udp: list[UdpListener] = []
        self._tcp: list[TcpListener] = []

    @property
    def bound(self) -> tuple[Bound, ...]:
        out = [Bound("udp", *u.sockname) for u in self._udp]
        out += [Bound("tcp", *t.sockname) for t in self._tcp]
        return tuple(out)

    async def start(self) -> None:
        """Bind every address (UDP and TCP) and start answering. On any bind error nothing stays open."""
        loop = asyncio.get_running_loop()
        socks: list[tuple[list[socket.socket], socket.socket]] = []
        try:
            for addr in self._addresses:
                socks.append(self._bind_pair(addr))
        except BaseException:
            for group, t in socks:
                for u in group:
                    u.close()
                t.close()
            raise
        for (udp_sock, *siblings), tcp_sock in socks:
            u_listener = UdpListener(udp_sock, self._handler, self.stats, siblings=siblings)
            u_listener.start(loop)
            self._udp.append(u_listener)
            t_listener = TcpListener(
                tcp_sock,
                self._handler,
                self.stats,
                idle_timeout=self._idle,
                budget=self._budget,
                backlog=self._backlog,
            )
            await t_listener.start()
            self._tcp.append(t_listener)
        log.info("DNS listening on %s", ", ".join(str(b) for b in self.bound))

    def _bind_pair(self, addr: ListenAddress) -> tuple[list[socket.socket], socket.socket]:
        """UDP (`threads` sockets) and TCP on one address and the same port. Port 0 asks for any port: TCP
        takes the one UDP got, and when a TCP socket (say an outgoing connection) already holds that
        port, another is tried."""
        attempts = ANY_PORT_ATTEMPTS if addr.port == 0 else 1
        for attempt in range(attempts):
            udp = bind_udp_group(addr, self._threads, reuse_port=self._reuse_port)
            port = udp[0].getsockname()[1]
            try:
                tcp = bind_tcp(ListenAddress(addr.host, port), reuse_port=self._reuse_port)
            except OSError as exc:
                for u in udp:
                    u.close()
                if exc.errno != errno.EADDRINUSE or attempt == attempts - 1:
                    raise
                log.debug("port %d is free for UDP but not TCP on %s; trying another", port, addr.host)
                continue
            except BaseException:
                for u in udp:
                    u.close()
                raise
            return udp, tcp
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        """Stop answering and close every socket."""
        udp, self._udp = self._udp, []
        tcp, self._tcp = self._tcp, []
        for u in udp:
            u.close()
        for t in tcp:
            await t.close()
