"""Binding listening sockets: one UDP socket (`dns.threads` of them) and one TCP socket per listen address.

TCP sockets get SO_REUSEADDR (a restart never waits for TIME_WAIT); SO_REUSEPORT is set where an
address is shared on purpose: by `dns.workers` processes, and by the `dns.threads` UDP sockets of one
address (`bind_udp_group`); IPv6 sockets get IPV6_V6ONLY so "[::]:53" and "0.0.0.0:53" can be
bound side by side. Sockets are non-blocking.
"""

from __future__ import annotations

import contextlib
import socket

from gslbd.model.config import ListenAddress

UDP_RCVBUF = 4 * 1024 * 1024  # room for bursts between two wakeups of the event loop
TCP_BACKLOG = 1024


def family_of(host: str) -> socket.AddressFamily:
    """AF_INET6 for an IPv6 literal ("::1"), else AF_INET."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def address_to_int(host: str, v6: bool) -> int:
    """The integer value of a numeric address as returned by recvfrom/getpeername."""
    if v6:
        # Scoped link-local addresses come back as "fe80::1%eth0"; the scope is not part of the address.
        pct = host.find("%")
        if pct >= 0:
            host = host[:pct]
        return int.from_bytes(socket.inet_pton(socket.AF_INET6, host), "big")
    return int.from_bytes(socket.inet_aton(host), "big")


def _new_socket(addr: ListenAddress, kind: socket.SocketKind, reuse_port: bool) -> socket.socket:
    """`reuse_port` only for worker processes: set everywhere, a second gslbd started by mistake on the
    same address would silently take a share of the queries instead of failing with "address in use"."""
    family = family_of(addr.host)
    sock = socket.socket(family, kind)
    try:
        if kind == socket.SOCK_STREAM:  # TIME_WAIT; on UDP it would let a second server bind too
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port and hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((addr.host, addr.port))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def bind_udp(addr: ListenAddress, *, reuse_port: bool = False) -> socket.socket:
    """A bound, non-blocking UDP socket on `addr`."""
    sock = _new_socket(addr, socket.SOCK_DGRAM, reuse_port)
    with contextlib.suppress(OSError):  # the kernel caps it at net.core.rmem_max; the default works too
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RCVBUF)
    return sock


def bind_udp_group(addr: ListenAddress, count: int, *, reuse_port: bool = False) -> list[socket.socket]:
    """`count` bound UDP sockets on `addr`, all on one port in one SO_REUSEPORT group (the kernel spreads
    the datagrams over them by the client's address and port): one per C UDP loop (`dns.threads`). One
    socket is `bind_udp`'s. Unless `reuse_port` (workers: the group is shared with the sibling processes),
    the address is first bound alone for a moment, so that another server already there is still refused
    with "address in use" instead of quietly taking a share of the queries."""
    if count <= 1:
        return [bind_udp(addr, reuse_port=reuse_port)]
    if not reuse_port:
        probe = bind_udp(addr)
        addr = ListenAddress(addr.host, bound_port(probe))
        probe.close()
    socks = [bind_udp(addr, reuse_port=True)]
    try:
        same = ListenAddress(addr.host, bound_port(socks[0]))
        while len(socks) < count:
            socks.append(bind_udp(same, reuse_port=True))
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


def bind_tcp(addr: ListenAddress, *, reuse_port: bool = False) -> socket.socket:
    """A bound, listening, non-blocking TCP socket on `addr`."""
    sock = _new_socket(addr, socket.SOCK_STREAM, reuse_port)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.listen(TCP_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def bound_port(sock: socket.socket) -> int:
    """The port a socket is bound to (useful when port 0 was asked for)."""
    port: int = sock.getsockname()[1]
    return port
