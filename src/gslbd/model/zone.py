"""Zones this server is authoritative for."""

from __future__ import annotations

from dataclasses import dataclass

from gslbd.model.dnssec import Dnssec


@dataclass(frozen=True, slots=True)
class Soa:
    """The zone's SOA record. `minimum` is the negative TTL (RFC 2308)."""

    mname: str
    rname: str
    serial: int
    refresh: int = 3600
    retry: int = 600
    expire: int = 604800
    minimum: int = 30
    automatic: bool = False  # `soa.serial` not configured: the app stamps it (gslbd/app/serials.py)


@dataclass(frozen=True, slots=True)
class Nameserver:
    """One name in the apex NS RRset; `addresses` become glue when the name is inside the zone."""

    name: str
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StaticRecord:
    """A static record served as-is. `value` is the RDATA in presentation format."""

    name: str
    rtype: str
    value: str
    ttl: int


@dataclass(frozen=True, slots=True)
class Zone:
    """An authoritative zone. `origin` is absolute and lower case."""

    origin: str
    ttl: int
    negative_ttl: int
    soa: Soa
    nameservers: tuple[Nameserver, ...]
    records: tuple[StaticRecord, ...] = ()
    dnssec: Dnssec | None = None  # signed when set (docs/dnssec.md)
