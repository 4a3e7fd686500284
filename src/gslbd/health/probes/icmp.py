"""`icmp` checks: ICMP echo (ping). Up to `count` echo requests are sent one after another, each
given timeout/count to be answered; the first reply makes the endpoint healthy.

The socket is an unprivileged ping socket (SOCK_DGRAM, allowed by net.ipv4.ping_group_range) when
the kernel allows it, else a raw socket (root or CAP_NET_RAW). `socket_problem` says at config load
when neither can be opened.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import struct
import time

from gslbd.health.probes.base import BaseProbe, ProbeFailed, probe_host
from gslbd.model.check import Check
from gslbd.model.service import Endpoint

_ECHO_REQUEST: dict[int, int] = {socket.AF_INET: 8, socket.AF_INET6: 128}
_ECHO_REPLY: dict[int, int] = {socket.AF_INET: 0, socket.AF_INET6: 129}
_PROTO: dict[int, int] = {socket.AF_INET: socket.IPPROTO_ICMP, socket.AF_INET6: socket.IPPROTO_ICMPV6}
_PAYLOAD = b"gslbd-health-icmp"
_idents = itertools.count((os.getpid() * 7919) & 0xFFFF)

NO_PRIVILEGE = (
    "icmp checks need a ping socket or a raw socket, and this process may open neither: run gslbd "
    "as root or with CAP_NET_RAW, or allow its group ping sockets (sysctl net.ipv4.ping_group_range)"
)


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return int(~total & 0xFFFF)


def echo_request(family: int, ident: int, seq: int) -> bytes:
    """An echo request; the checksum is ours for IPv4 (the kernel fills it for ICMPv6)."""
    header = struct.pack("!BBHHH", _ECHO_REQUEST[family], 0, 0, ident, seq)
    if family == socket.AF_INET:
        header = struct.pack("!BBHHH", _ECHO_REQUEST[family], 0, checksum(header + _PAYLOAD), ident, seq)
    return header + _PAYLOAD


def parse_reply(family: int, packet: bytes, raw: bool) -> tuple[int, int] | None:
    """(ident, seq) of an echo reply, None for any other packet. IPv4 raw sockets include the IP header."""
    if raw and family == socket.AF_INET and packet:
        packet = packet[(packet[0] & 0x0F) * 4 :]
    if len(packet) < 8:
        return None
    kind, _code, _sum, ident, seq = struct.unpack("!BBHHH", packet[:8])
    if kind != _ECHO_REPLY[family]:
        return None
    return ident, seq


def open_socket(family: int) -> tuple[socket.socket, bool]:
    """(socket, raw): a ping socket if allowed, else a raw one; OSError when neither opens."""
    try:
        sock = socket.socket(family, socket.SOCK_DGRAM, _PROTO[family])
        raw = False
    except OSError:
        sock = socket.socket(family, socket.SOCK_RAW, _PROTO[family])
        raw = True
    sock.setblocking(False)
    return sock, raw


def socket_problem() -> str | None:
    """NO_PRIVILEGE when this process can open no ICMP socket, else None."""
    try:
        sock, _ = open_socket(socket.AF_INET)
    except OSError:
        return NO_PRIVILEGE
    sock.close()
    return None


async def _readable(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    fd = sock.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def _wait_reply(sock: socket.socket, family: int, raw: bool, target: str, ident: int, seq: int) -> None:
    """Return when the reply to (ident, seq) from target arrives."""
    while True:
        await _readable(sock)
        while True:
            try:
                packet, source = sock.recvfrom(2048)
            except BlockingIOError:
                break
            reply = parse_reply(family, packet, raw)
            if reply is None or source[0] != target:
                continue
            # A ping socket's kernel rewrites the identifier and only delivers this socket's replies.
            if reply[1] == seq and (not raw or reply[0] == ident):
                return


async def _address(host: str) -> tuple[int, str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, None, type=socket.SOCK_RAW)
    if not infos:
        raise ProbeFailed(f"cannot resolve {host}")
    family, _, _, _, sockaddr = infos[0]
    return int(family), str(sockaddr[0])


class IcmpProbe(BaseProbe):
    async def attempt(self, endpoint: Endpoint, check: Check) -> tuple[bool, str]:
        family, target = await _address(probe_host(endpoint))
        try:
            sock, raw = open_socket(family)
        except OSError as exc:
            raise ProbeFailed(f"cannot open an ICMP socket: {exc.strerror or exc}") from None
        count = max(1, check.count)
        wait = check.timeout * 0.95 / count
        ident = next(_idents) & 0xFFFF
        with sock:
            for seq in range(1, count + 1):
                sent = time.perf_counter()
                sock.sendto(echo_request(family, ident, seq), (target, 0))
                try:
                    async with asyncio.timeout(wait):
                        await _wait_reply(sock, family, raw, target, ident, seq)
                except TimeoutError:
                    continue
                rtt = (time.perf_counter() - sent) * 1000
                return True, f"echo reply in {rtt:.2f} ms" + (
                    f" (request {seq} of {count})" if seq > 1 else ""
                )
        return False, f"no reply to {count} echo request" + ("" if count == 1 else "s")
