"""Cluster mode's Redis names, TTLs and pub/sub messages (pure: no I/O).

    <prefix>lock:<zone>:<fqdn>:<address>    SET NX PX max(interval/2, 2s); value: the holder's instance id
    <prefix>health:<zone>:<fqdn>:<address>  "1" (alive) or "0" (dead), raw probe result; PX 2 x interval
    <prefix>health:updates                  channel: {"zone":...,"fqdn":...,"address":...,"alive":true}
    <prefix>admin                           hash: "<fqdn>|<address>" -> "up" | "down" | "obey" (no TTL)
    <prefix>admin:updates                   channel: {"fqdn":...,"address":...,"state":"down"}
    <prefix>endpoints                       hash: "<fqdn>|<address>" -> an endpoint overlay entry as JSON
                                            ({"op":"add","endpoint":{...}}, model/overlay.py; no TTL)
    <prefix>endpoints:updates               channel: {"fqdn":...,"address":...,"entry":{...}|null,"from":id}
    <prefix>loadlock:<zone>:<fqdn>:<address> SET NX PX 0.8 x load.every: who fetches the load this interval
    <prefix>load:<zone>:<fqdn>:<address>    the last good load figure fetched ("0.42"); PX 3 x load.every
    <prefix>load:updates                    channel: {"zone":..,"fqdn":..,"address":..,"load":0.42,"from":id}

<zone> and <fqdn> are written as the model holds them: absolute, lower case, with the trailing dot
("gslb.example.com.", "app.gslb.example.com."). <address> is the endpoint's answered address in its
normal text form ("192.0.2.10", "2001:db8::10", or a hostname with its trailing dot); for one check of
an endpoint with several (`endpoints[].checks`) it is "<address>#<check>" ("192.0.2.10#web"), in the
lock and health names and in the update's "address" alike, so each check is probed, shared and
judged on its own while a single check's names stay as they are. Messages are compact
JSON with the keys in the order shown (the same bytes as Go's encoding/json writes for CoreDNS-GSLB).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gslbd.model.service import EndpointKey
from gslbd.state.store import decode_key, encode_key
from gslbd.types import AdminState

MIN_LOCK_TTL = 2.0  # seconds


def lock_ttl(interval: float) -> float:
    """Seconds a probe lock lives: max(interval / 2, 2 s)."""
    return max(interval / 2, MIN_LOCK_TTL)


def health_ttl(interval: float) -> float:
    """Seconds a shared raw result lives: 2 x interval."""
    return 2 * interval


def millis(seconds: float) -> int:
    """A TTL in whole milliseconds (PX), at least 1."""
    return max(1, round(seconds * 1000))


@dataclass(frozen=True, slots=True)
class ClusterKeys:
    """Every Redis name cluster mode uses, under one prefix ("gslb:" by default)."""

    prefix: str = "gslb:"

    def lock(self, zone: str, fqdn: str, address: str) -> str:
        return f"{self.prefix}lock:{zone}:{fqdn}:{address}"

    def health(self, zone: str, fqdn: str, address: str) -> str:
        return f"{self.prefix}health:{zone}:{fqdn}:{address}"

    @property
    def updates(self) -> str:
        """The channel raw health results are published on."""
        return f"{self.prefix}health:updates"

    @property
    def admin(self) -> str:
        """The hash of run-time admin states."""
        return f"{self.prefix}admin"

    @property
    def admin_updates(self) -> str:
        """The channel admin state changes are published on."""
        return f"{self.prefix}admin:updates"

    @property
    def endpoints(self) -> str:
        """The hash of the endpoint overlay."""
        return f"{self.prefix}endpoints"

    def load_lock(self, zone: str, fqdn: str, address: str) -> str:
        return f"{self.prefix}loadlock:{zone}:{fqdn}:{address}"

    def load(self, zone: str, fqdn: str, address: str) -> str:
        return f"{self.prefix}load:{zone}:{fqdn}:{address}"

    @property
    def load_updates(self) -> str:
        """The channel load figures (docs/policies/load.md) are published on."""
        return f"{self.prefix}load:updates"

    @property
    def endpoints_updates(self) -> str:
        """The channel endpoint overlay changes are published on."""
        return f"{self.prefix}endpoints:updates"


@dataclass(frozen=True, slots=True)
class HealthUpdate:
    """One raw health result as published: alive is the probe's outcome, before rise/fall."""

    zone: str
    fqdn: str
    address: str
    alive: bool


@dataclass(frozen=True, slots=True)
class AdminUpdate:
    fqdn: str
    address: str
    state: AdminState

    @property
    def key(self) -> EndpointKey:
        return (self.fqdn, self.address)


def health_value(alive: bool) -> str:
    return "1" if alive else "0"


def parse_health_value(value: object) -> bool | None:
    """Value "1" -> True, "0" -> False; anything else (a missing key) -> None."""
    if value == "1":
        return True
    if value == "0":
        return False
    return None


def encode_health_update(update: HealthUpdate) -> str:
    return json.dumps(
        {"zone": update.zone, "fqdn": update.fqdn, "address": update.address, "alive": update.alive},
        separators=(",", ":"),
    )


def decode_health_update(text: str | bytes) -> HealthUpdate | None:
    """The update in a message, or None when it is not one (wrong JSON, missing or mistyped keys)."""
    data = _object(text)
    if data is None:
        return None
    zone, fqdn, address, alive = (data.get(k) for k in ("zone", "fqdn", "address", "alive"))
    if not (isinstance(zone, str) and isinstance(fqdn, str) and isinstance(address, str)):
        return None
    if not isinstance(alive, bool):
        return None
    return HealthUpdate(zone, fqdn, address, alive)


def encode_admin_update(update: AdminUpdate) -> str:
    return json.dumps(
        {"fqdn": update.fqdn, "address": update.address, "state": update.state.value},
        separators=(",", ":"),
    )


def decode_admin_update(text: str | bytes) -> AdminUpdate | None:
    data = _object(text)
    if data is None:
        return None
    fqdn, address, state = (data.get(k) for k in ("fqdn", "address", "state"))
    if not (isinstance(fqdn, str) and isinstance(address, str) and isinstance(state, str)):
        return None
    try:
        return AdminUpdate(fqdn, address, AdminState(state))
    except ValueError:
        return None


def admin_field(key: EndpointKey) -> str:
    """The admin hash's field for an endpoint: "<fqdn>|<address>"."""
    return encode_key(key)


def parse_admin_hash(entries: dict[str, str]) -> dict[EndpointKey, AdminState]:
    """The admin hash as states by endpoint key; fields or values that do not parse are skipped."""
    out: dict[EndpointKey, AdminState] = {}
    for name, value in entries.items():
        try:
            out[decode_key(name)] = AdminState(value)
        except ValueError:
            continue
    return out


def _object(text: str | bytes) -> dict[str, object] | None:
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None
