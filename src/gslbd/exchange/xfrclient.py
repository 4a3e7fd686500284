"""Reading a peer's exchange zone: its SOA serial (one UDP query) and IXFR/AXFR over TCP.

`ZoneCopy` is what this site holds of one peer's exchange zone for one served zone: the serial, the
A/AAAA records per label, and the addresses per service fqdn derived from them (kept up to date
label by label, so that a transfer of ten changes costs ten updates, not a pass over every service).

A peer that does not offer the channel answers the SOA or the transfer with NXDOMAIN, REFUSED, NOTIMP,
FORMERR or NODATA (k8gb, a gslbd with `peers.transfer: false` or several DNS workers, an older gslbd):
`NoChannel` says so and the poller polls that peer name by name. A transfer that breaks (timeout,
connection closed, a message that does not read or verify) is `TransferFailed`: a failed poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from gslbd.exchange.transport import sign, signature_problem
from gslbd.exchange.wireformat import rcode_text
from gslbd.exchange.xfrwire import (
    AXFR,
    IXFR,
    BadMessage,
    Message,
    Rr,
    StreamVerifier,
    heartbeat_of,
    name_labels,
    read_message,
    rr_serial,
    transfer_query,
)
from gslbd.exchange.zone import AAAA, LOAD_LABEL, SOA, TXT, VOTES_LABEL, A
from gslbd.model.config import ListenAddress
from gslbd.model.tsig import TsigKey

NOERROR, FORMERR, NXDOMAIN, NOTIMP, REFUSED = 0, 1, 3, 4, 5
NO_CHANNEL_RCODES = frozenset((FORMERR, NXDOMAIN, NOTIMP, REFUSED))
MAX_MESSAGE = 65535


class NoChannel(Exception):
    """The peer does not offer its exchange zone (to us): poll it name by name."""


class TransferFailed(Exception):
    """A SOA query or transfer that did not complete; `tsig` when a signature was the problem."""

    def __init__(self, reason: str, *, tsig: bool = False) -> None:
        super().__init__(reason)
        self.tsig = tsig


@dataclass(slots=True)
class ZoneCopy:
    """One peer's exchange zone for the served zone `origin`, as of `serial`."""

    origin: str
    serial: int
    records: dict[tuple[str, int], set[bytes]] = field(default_factory=dict)
    targets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    votes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # service fqdn -> its votes (TXT)
    loads: dict[str, tuple[str, ...]] = field(default_factory=dict)  # service fqdn -> its load figures

    def refresh(self, labels: Iterable[str]) -> None:
        """Recompute the addresses (or the votes, or the load figures) of the services behind `labels`
        from the records."""
        for label in labels:
            service, texts_of = votes_service(label), self.votes
            if service is None:
                service, texts_of = load_service(label), self.loads
            if service is not None:
                texts = sorted(_txt_text(r) for r in self.records.get((label, TXT), ()))
                if texts:
                    texts_of[f"{service}.{self.origin}"] = tuple(texts)
                else:
                    texts_of.pop(f"{service}.{self.origin}", None)
                continue
            addresses = [str(ipaddress.IPv4Address(r)) for r in sorted(self.records.get((label, A), ()))]
            addresses += [str(ipaddress.IPv6Address(r)) for r in sorted(self.records.get((label, AAAA), ()))]
            fqdn = f"{label}.{self.origin}"
            if addresses:
                self.targets[fqdn] = tuple(addresses)
            else:
                self.targets.pop(fqdn, None)


def merged_targets(copies: Iterable[ZoneCopy]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for copy in copies:
        out.update(copy.targets)
    return out


def merged_votes(copies: Iterable[ZoneCopy]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for copy in copies:
        out.update(copy.votes)
    return out


def merged_loads(copies: Iterable[ZoneCopy]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for copy in copies:
        out.update(copy.loads)
    return out


_VOTES_SUFFIX = "." + VOTES_LABEL
_LOAD_SUFFIX = "." + LOAD_LABEL


def votes_service(label: str) -> str | None:
    """`app` for the votes label `app.votes`; None for another label."""
    if label.endswith(_VOTES_SUFFIX) and len(label) > len(_VOTES_SUFFIX):
        return label[: -len(_VOTES_SUFFIX)]
    return None


def load_service(label: str) -> str | None:
    """`app` for the load label `app.load`; None for another label."""
    if label.endswith(_LOAD_SUFFIX) and len(label) > len(_LOAD_SUFFIX):
        return label[: -len(_LOAD_SUFFIX)]
    return None


def _kept(label: str, rtype: int, rdata: bytes) -> bool:
    """Whether a transferred record is one this site reads: A/AAAA of a service, TXT of its votes or
    of its load figures."""
    if rtype in (A, AAAA):
        return len(rdata) == (4 if rtype == A else 16)
    if rtype != TXT or len(rdata) < 1:
        return False
    return votes_service(label) is not None or load_service(label) is not None


def _txt_text(rdata: bytes) -> str:
    """The first string of a TXT rdata (a vote is one string)."""
    return rdata[1 : 1 + rdata[0]].decode("ascii", "replace")


def read_soa_reply(
    data: bytes, qid: int, apex: str, beat_owner: str, key: TsigKey | None, mac: bytes
) -> tuple[int, float | None]:
    """(serial, heartbeat) from the reply to the apex SOA query. NoChannel when the peer has no
    exchange zone; TransferFailed when the reply is not one to our query or does not verify."""
    try:
        message = read_message(data)
    except BadMessage as exc:
        raise TransferFailed(str(exc)) from None
    if message.qid != qid or not message.flags & 0x8000 or message.opcode != 0:
        raise TransferFailed("not a response to this query")
    problem = signature_problem(data, key, mac)
    if problem:
        raise TransferFailed(problem, tsig=True)
    labels = name_labels(apex)
    if message.question is None or message.question != (labels, SOA):
        raise TransferFailed("the question was not echoed")
    if message.rcode in NO_CHANNEL_RCODES:
        raise NoChannel(f"{apex} SOA: {rcode_text(message.rcode)}")
    if message.rcode != NOERROR:
        raise TransferFailed(f"{apex} SOA: {rcode_text(message.rcode)}")
    for rr in message.answer:
        if rr.rtype == SOA and rr.owner == labels:
            return rr_serial(data, rr), heartbeat_of(message, name_labels(beat_owner))
    raise NoChannel(f"{apex} has no SOA")


async def transfer(
    server: ListenAddress,
    apex: str,
    origin: str,
    have: ZoneCopy | None,
    timeout: float,
    rng: random.Random,
    key: TsigKey | None = None,
    local_host: str | None = None,
    idle: float | None = None,
) -> tuple[ZoneCopy, str, int]:
    """IXFR from `have` (AXFR without it) over TCP from `local_host` (this site's own address, which the
    peer knows as one of ours): (the new copy, "ixfr" | "axfr" | "current", bytes received).
    `timeout` bounds the whole transfer; `idle` (None: no bound) the connect and each wait for the
    next bytes, so that a link that dies mid-transfer fails the poll in seconds, not `timeout`.
    NoChannel, TransferFailed, TimeoutError or OSError otherwise."""
    qid = rng.randrange(65536)
    query = transfer_query(apex, IXFR if have is not None else AXFR, qid, have.serial if have else None)
    wire, mac = sign(query, key)
    verifier = StreamVerifier(key, mac) if key is not None else None
    builder = _Builder(apex, origin, have)
    received = 0
    async with asyncio.timeout(timeout):
        local = (local_host, 0) if local_host is not None else None
        connecting = asyncio.open_connection(server.host, server.port, local_addr=local)
        reader, writer = await asyncio.wait_for(connecting, idle)
        try:
            writer.write(len(wire).to_bytes(2, "big") + wire)
            await writer.drain()
            while not builder.done:
                size = int.from_bytes(await asyncio.wait_for(reader.readexactly(2), idle), "big")
                data = await asyncio.wait_for(reader.readexactly(size), idle)
                received += 2 + size
                builder.feed(data, qid, verifier)
        except asyncio.IncompleteReadError:
            raise TransferFailed("the connection closed before the transfer was complete") from None
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    return builder.result(), builder.kind, received


class _Builder:
    """Reads the messages of one transfer (RFC 1995 / 5936): a new ZoneCopy for a full transfer; for an
    incremental one the changes are collected and applied to `have` (in place) once the transfer is
    complete, so that a broken transfer leaves `have` as it was and ten changes cost ten updates."""

    def __init__(self, apex: str, origin: str, have: ZoneCopy | None) -> None:
        self.apex = name_labels(apex)
        self.origin = origin
        self.have = have
        self.done = False
        self.kind = ""
        self._serial: int | None = None  # the first SOA's: the version being transferred
        self._count = 0  # answer records read
        self._mode = ""  # "full" or "incremental"
        self._adding = False
        self._copy: ZoneCopy | None = None
        self._touched: set[str] = set()
        self._edits: list[tuple[bool, str, int, bytes]] = []  # incremental: (add?, label, type, rdata)

    def feed(self, data: bytes, qid: int, verifier: StreamVerifier | None) -> None:
        try:
            message = read_message(data)
        except BadMessage as exc:
            raise TransferFailed(str(exc)) from None
        if message.qid != qid or not message.flags & 0x8000:
            raise TransferFailed("not a response to this transfer")
        if message.rcode in NO_CHANNEL_RCODES:
            raise NoChannel(f"transfer refused ({rcode_text(message.rcode)})")
        if verifier is not None:
            try:
                verifier.verify(data, message)
            except BadMessage as exc:
                raise TransferFailed(str(exc), tsig=exc.tsig) from None
        if message.rcode != NOERROR:
            raise TransferFailed(f"transfer failed with {rcode_text(message.rcode)}")
        if not message.answer:
            raise TransferFailed("a transfer message without records")
        for rr in message.answer:
            self._record(data, message, rr)
            if self.done:
                return
        if self._count == 1 and self.have is not None and self._serial == self.have.serial:
            # IXFR: the SOA alone, of the version we hold, means we are current (RFC 1995 4); any other
            # first message of one record is the start of a longer stream
            self.kind = "current"
            self._copy = self.have
            self.done = True

    def _record(self, data: bytes, message: Message, rr: Rr) -> None:
        self._count += 1
        is_soa = rr.rtype == SOA and rr.owner == self.apex
        serial = rr_serial(data, rr) if is_soa else None
        if self._count == 1:
            if serial is None:
                raise TransferFailed("a transfer that does not start with the zone's SOA")
            self._serial = serial
            return
        if self._count == 2:
            if serial is not None and self.have is not None and serial == self.have.serial:
                self._mode, self.kind = "incremental", "ixfr"
                self._copy = self.have
                self._adding = False
                return
            if serial is not None and serial == self._serial:  # an empty zone
                self._mode, self.kind = "full", "axfr"
                self._copy = ZoneCopy(self.origin, serial)
                self._finish()
                return
            self._mode, self.kind = "full", "axfr"
            self._copy = ZoneCopy(self.origin, self._serial or 0)
        copy = self._copy
        assert copy is not None
        if self._mode == "full":
            if serial is not None:
                if serial != self._serial:
                    raise TransferFailed("a full transfer ended with another serial")
                self._finish()
                return
            self._add(copy, rr.owner, rr.rtype, rr.rdata)
            return
        if serial is not None:
            if self._adding and serial == self._serial:
                self._finish()
                return
            self._adding = not self._adding
            return
        label = self._label(rr.owner)
        if label is not None and _kept(label, rr.rtype, rr.rdata):
            self._edits.append((self._adding, label, rr.rtype, rr.rdata))

    def _add(self, copy: ZoneCopy, owner: tuple[bytes, ...], rtype: int, rdata: bytes) -> None:
        label = self._label(owner)
        if label is None or not _kept(label, rtype, rdata):
            return
        copy.records.setdefault((label, rtype), set()).add(rdata)
        self._touched.add(label)

    def _label(self, owner: tuple[bytes, ...]) -> str | None:
        n = len(self.apex)
        if len(owner) <= n or owner[-n:] != self.apex:
            return None
        return ".".join(p.decode("ascii", "replace") for p in owner[:-n])

    def _finish(self) -> None:
        copy = self._copy
        assert copy is not None
        if self._mode == "incremental":
            for add, label, rtype, rdata in self._edits:
                if add:
                    copy.records.setdefault((label, rtype), set()).add(rdata)
                else:
                    held = copy.records.get((label, rtype))
                    if held is not None:
                        held.discard(rdata)
                        if not held:
                            del copy.records[(label, rtype)]
                self._touched.add(label)
            copy.serial = self._serial if self._serial is not None else copy.serial
        copy.refresh(self._touched)
        self.done = True

    def result(self) -> ZoneCopy:
        if self._copy is None:
            raise TransferFailed("the transfer ended early")
        return self._copy
