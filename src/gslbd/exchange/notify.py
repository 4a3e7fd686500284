"""DNS NOTIFY (RFC 1996) between sites: push instead of waiting for the next poll.

Sending: when this site's published localtargets change, `Notifier.send(zones, servers)` sends a NOTIFY
for each changed zone to every peer nameserver, from this site's own DNS address (the first specific
`dns.listen` host of the target's family), so that the peer recognises the source. Each message is
retried (ATTEMPTS in all, `peers.timeout` apart) until the peer answers; a change while a NOTIFY to the
same server is still in flight sends one more after it, so bursts are coalesced.

Receiving: `notify_sources(config)` maps every configured peer nameserver address to its peer names;
the composition root answers a NOTIFY from such an address (and re-polls that peer at once) and
refuses any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import random
from collections.abc import Callable, Iterable, Mapping

from gslbd.exchange.transport import UdpChannel, sign, signature_problem
from gslbd.exchange.wireformat import NOTIFY_OPCODE, notify_message, rcode_text
from gslbd.exchange.xfrwire import notify_with_serial
from gslbd.metrics import NOTIFY_SENT
from gslbd.model.config import Config, ListenAddress
from gslbd.model.exchange_cut import exchange_apex

log = logging.getLogger(__name__)

ATTEMPTS = 3
_WILDCARDS = ("0.0.0.0", "::", "")


def normal_ip(text: str) -> str:
    """An address in its normal text form ("::FFFF:1" -> "::ffff:0.0.0.1"); unparsable text as given."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


def notify_sources(config: Config) -> dict[str, tuple[str, ...]]:
    """Peer nameserver address -> the peer sites it serves: who may send this site a NOTIFY."""
    out: dict[str, tuple[str, ...]] = {}
    if config.peers is None:
        return out
    for site in config.peers.sites:
        for server in site.nameservers:
            key = normal_ip(server.host)
            if site.name not in out.get(key, ()):
                out[key] = (*out.get(key, ()), site.name)
    return out


def source_address(ip: int, v6: bool) -> str:
    """A sender's address as text; an IPv4-mapped IPv6 address as its IPv4 form."""
    if not v6:
        return str(ipaddress.IPv4Address(ip))
    addr = ipaddress.IPv6Address(ip)
    return str(addr.ipv4_mapped) if addr.ipv4_mapped is not None else str(addr)


def notify_accepted(sources: Mapping[str, tuple[str, ...]], zone: str, ip: int, v6: bool) -> bool:
    """The one rule for a NOTIFY: it names a served zone ("" when not) and comes from a configured
    peer nameserver (`sources` is `notify_sources(config)`). The main process and every worker ask this."""
    return bool(zone) and bool(sources.get(source_address(ip, v6), ()))


def source_host(config: Config, target: str) -> str | None:
    """The address to send from to reach `target`: this site's first specific listen host of the same
    family, or None (let the system choose) when it listens on a wildcard only."""
    v6 = ":" in target
    for listen in config.dns.listen:
        if (":" in listen.host) == v6 and listen.host not in _WILDCARDS:
            return listen.host
    return None


def peer_nameservers(config: Config) -> list[ListenAddress]:
    """Every peer nameserver once, in configuration order."""
    if config.peers is None:
        return []
    return list(dict.fromkeys(s for site in config.peers.sites for s in site.nameservers))


class Notifier:
    """Sends NOTIFY messages; one in flight per (zone, server), later changes coalesced."""

    def __init__(self, config: Config, rng: random.Random) -> None:
        self._config = config
        self._rng = rng
        self._tasks: dict[tuple[str, ListenAddress], asyncio.Task[None]] = {}
        self._again: set[tuple[str, ListenAddress]] = set()
        self._failing: set[ListenAddress] = set()
        # zone origin -> this site's exchange zone serial for it (None: no exchange zone): carried in
        # the NOTIFY's answer section so that the peer need not ask the SOA (exchange/xfrserve.py)
        self.serial: Callable[[str], int | None] = lambda origin: None

    def update(self, config: Config) -> None:
        self._config = config

    def send(self, zones: Iterable[str], servers: Iterable[ListenAddress] | None = None) -> None:
        """NOTIFY every server (default: every peer nameserver) about each zone. Returns at once."""
        targets = list(servers) if servers is not None else peer_nameservers(self._config)
        loop = asyncio.get_running_loop()
        for zone in zones:
            for server in targets:
                key = (zone, server)
                if key in self._tasks:
                    self._again.add(key)
                    continue
                self._tasks[key] = loop.create_task(self._deliver(key), name=f"gslbd-notify-{server}")

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        self._again.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _deliver(self, key: tuple[str, ListenAddress]) -> None:
        try:
            while True:
                self._again.discard(key)
                await self._notify(*key)
                if key not in self._again:
                    return
        finally:
            self._tasks.pop(key, None)

    async def _notify(self, zone: str, server: ListenAddress) -> None:
        peers = self._config.peers
        timeout = peers.timeout if peers is not None else 1.0
        key = peers.tsig if peers is not None else None
        why = ""
        try:
            channel = await UdpChannel.open(server, self._rng, source_host(self._config, server.host))
        except OSError as exc:
            self._result(server, zone, f"cannot open a socket: {exc}")
            return
        try:
            for _ in range(ATTEMPTS):
                qid = channel.new_id()
                serial = self.serial(zone)
                if serial is None:
                    wire = notify_message(zone, qid)
                else:
                    wire = notify_with_serial(zone, qid, exchange_apex(self._config.site.name, zone), serial)
                message, mac = sign(wire, key)
                try:
                    reply = await channel.exchange(message, qid, timeout)
                except TimeoutError:
                    why = f"no answer within {timeout:g}s"
                    continue
                except OSError as exc:
                    why = str(exc)
                    continue
                why = _check_reply(reply) or signature_problem(reply, key, mac)
                break
        finally:
            channel.close()
        self._result(server, zone, why)

    def _result(self, server: ListenAddress, zone: str, why: str) -> None:
        NOTIFY_SENT.labels(result="failed" if why else "ok").inc()
        if why and server not in self._failing:
            self._failing.add(server)
            log.warning(
                "NOTIFY for %s to %s failed: %s (the peer still polls every interval)", zone, server, why
            )
        elif not why and server in self._failing:
            self._failing.discard(server)
            log.info("NOTIFY to %s answered again", server)


def _check_reply(reply: bytes) -> str:
    """'' when `reply` acknowledges a NOTIFY, else why not."""
    if len(reply) < 12 or not reply[2] & 0x80 or (reply[2] >> 3) & 0xF != NOTIFY_OPCODE:
        return "the reply is not a NOTIFY response"
    rcode = reply[3] & 0xF
    return "" if rcode == 0 else f"answered {rcode_text(rcode)}"
