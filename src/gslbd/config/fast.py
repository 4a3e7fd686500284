"""The fast path of service validation: a service in the common shape, from plain values (a decoded JSON
object, or a YAML mapping made plain) straight to the model, with direct dict access and cheap checks.

It knows a narrow shape (the keys below; `check` only as `none` or a valid profile's name; no `zone`,
`locality`, `https` or `srv`). Whatever it does not know, and anything the located validator
(config/services.py) would report as an error or a warning, makes it give up (None); the caller then
validates that service the located way, so every problem is still reported at its file:line:field. A
service it does make is equal (==) to the one the located validator makes, with the same effects on the
context (the sites named, the check profiles used), which are applied only when it succeeds.
tests/unit/config/test_fast_path.py holds the two paths to that, valid and broken services alike.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

from gslbd.config.fields import SITE_NAME, TTL_MAX, Invalid
from gslbd.config.loader import Map, Node, Scalar, Seq
from gslbd.config.names import make_name, relative_to, target_text
from gslbd.config.service_context import ServiceContext, name_problem, served_zones, zone_of
from gslbd.config.zones import ZoneInfo
from gslbd.model.check import Check
from gslbd.model.service import Endpoint, Service
from gslbd.types import AdminState, AllDown, EndpointKind, PolicyName

E = TypeVar("E", bound=StrEnum)

_SERVICE_KEYS = frozenset(
    (
        "name",
        "policy",
        "failover_order",
        "weights",
        "ttl",
        "max_answers",
        "all_down",
        "fallback",
        "locality_names",
        "check",
        "endpoints",
    )
)
_ENDPOINT_KEYS = frozenset(("address", "site", "weight", "priority", "check", "probe_address", "admin"))
_NONE = "none"
_ABSENT = object()

FastItem = tuple[Service, tuple[str, ...]]  # a service and the sites it names, in validation order


class _Slow(Exception):
    """The service is not in the shape the fast path knows: validate it the located way."""


_SLOW = _Slow()


def _enum(kind: type[E], value: object, default: E) -> E:
    if value is _ABSENT:
        return default
    if type(value) is not str:
        raise _SLOW
    try:
        return kind(value)
    except ValueError:
        raise _SLOW from None


def _int(value: object, default: int, lo: int, hi: int = TTL_MAX) -> int:
    if value is _ABSENT:
        return default
    if type(value) is not int or not lo <= value <= hi:
        raise _SLOW
    return value


def _site(value: object) -> str:
    if type(value) is not str or not SITE_NAME.match(value):
        raise _SLOW
    return sys.intern(value)


def _target(value: object) -> tuple[str, EndpointKind]:
    """As names.target: an address (normalized) or a hostname, with its kind."""
    if type(value) is not str:
        raise _SLOW
    quick = ipv6_text(value.strip())
    if quick is not None:
        return quick, EndpointKind.IPV6
    try:
        return target_text(value)
    except Invalid:
        raise _SLOW from None


def ipv6_text(text: str) -> str | None:
    """The text `ipaddress` gives for an IPv6 address in the usual form (hex groups, at most one `::`),
    made by the C library's inet_pton/inet_ntop (a microsecond, not ipaddress's ten); None for anything
    else (not IPv6, an embedded IPv4 address or a scope, a form the two libraries could read or write
    differently): ask ipaddress then. The two agree on this form: lower case, no leading zeros, the
    longest run of two or more zero groups (the first of equal runs) written `::`."""
    if "." in text or "%" in text or ":" not in text:
        return None
    try:
        packed = socket.inet_pton(socket.AF_INET6, text)
    except (OSError, ValueError):  # ValueError: a NUL; UnicodeEncodeError: not ASCII
        return None
    if "::" in text:  # ipaddress wants `::` to stand for at least one group; the C library takes none
        groups = text.count(":") - text.startswith("::") - text.endswith("::")
        if groups > 7:
            return None
    out = socket.inet_ntop(socket.AF_INET6, packed)
    return None if "." in out else out


def _check(value: object, profiles: Mapping[str, tuple[Check, str]], used: list[str]) -> Check | None:
    """A `check:` value: `none`, or the name of a valid profile (recorded in `used`)."""
    if type(value) is not str:
        raise _SLOW
    if value == _NONE:
        return None
    found = profiles.get(value)
    if found is None:
        raise _SLOW
    used.append(value)
    return found[0]


def _name(ctx: ServiceContext, value: object) -> tuple[str, ZoneInfo]:
    """(the absolute name, its zone)."""
    if type(value) is not str:
        raise _SLOW
    text = value.strip()
    if text.endswith("."):
        origin = None
    elif len(ctx.zones) == 1 and text != "@":
        origin = ctx.zones[0].zone.origin
    else:
        raise _SLOW
    try:
        name = make_name(text, origin, wildcard=True)
    except Invalid:
        raise _SLOW from None
    info = zone_of(served_zones(ctx), name)
    if info is None or name_problem(info, name) is not None:
        raise _SLOW
    return name, info


def _endpoint(
    ctx: ServiceContext, value: object, name: str, default: Check | None, used: list[str]
) -> Endpoint:
    if type(value) is not dict or not _ENDPOINT_KEYS.issuperset(value):
        raise _SLOW
    address, kind = _target(value.get("address"))
    site = _site(value["site"]) if "site" in value else ctx.this_site
    check = _check(value["check"], ctx.checks.profiles, used) if "check" in value else default
    probe: str | None = None
    if "probe_address" in value:
        probe, probe_kind = _target(value["probe_address"])
        if probe_kind is EndpointKind.HOSTNAME:
            raise _SLOW
    return Endpoint(
        service=name,
        address=address,
        kind=kind,
        site=site,
        locality=ctx.site_locality(site),
        weight=_int(value.get("weight", _ABSENT), 1, 0, 1000),
        priority=_int(value.get("priority", _ABSENT), 0, 0),
        check=check,
        probe_address=probe,
        admin=_enum(AdminState, value.get("admin", _ABSENT), AdminState.OBEY),
    )


def _weights(value: object, policy: PolicyName) -> tuple[tuple[str, int], ...] | None:
    if value is _ABSENT:
        return None
    if policy is not PolicyName.WEIGHTED or type(value) is not dict or not value:
        raise _SLOW
    out = tuple((_site(site), _int(weight, 0, 0, 1000)) for site, weight in value.items())
    if not any(weight for _, weight in out):
        raise _SLOW
    return out


def _fallback(value: object, all_down: AllDown) -> tuple[str, ...]:
    if value is _ABSENT and all_down is not AllDown.FALLBACK:
        return ()
    if all_down is not AllDown.FALLBACK or type(value) is not list or not value:
        raise _SLOW
    found = [_target(item) for item in value]
    if len(found) > 1 and any(kind is EndpointKind.HOSTNAME for _, kind in found):
        raise _SLOW
    return tuple(dict.fromkeys(address for address, _ in found))


def _service(ctx: ServiceContext, obj: dict[str, object], keys: int | None) -> FastItem:
    if not _SERVICE_KEYS.issuperset(obj):
        raise _SLOW
    name, info = _name(ctx, obj.get("name"))
    origin = info.zone.origin
    get = obj.get
    policy = _enum(PolicyName, get("policy", _ABSENT), PolicyName.ROUND_ROBIN)
    order: tuple[str, ...] = ()
    if "failover_order" in obj:
        given = obj["failover_order"]
        if policy is not PolicyName.FAILOVER or type(given) is not list or not given:
            raise _SLOW
        order = tuple(map(_site, given))
        if len(set(order)) != len(order):
            raise _SLOW
    weights = _weights(get("weights", _ABSENT), policy)
    all_down = _enum(AllDown, get("all_down", _ABSENT), AllDown.SERVE_ALL)
    locality_names = get("locality_names", False)
    if type(locality_names) is not bool or (locality_names and name.startswith("*.")):
        raise _SLOW
    used: list[str] = []
    default = _check(obj["check"], ctx.checks.profiles, used) if "check" in obj else None
    items = get("endpoints", [])
    if type(items) is not list:
        raise _SLOW
    endpoints = tuple(_endpoint(ctx, item, name, default, used) for item in items)
    addresses = {e.address for e in endpoints}
    kinds = {e.kind is EndpointKind.HOSTNAME for e in endpoints}
    have = {e.site for e in endpoints}
    if len(addresses) != len(endpoints) or len(kinds) == 2 or (not endpoints and not ctx.peer_sites):
        raise _SLOW  # a duplicate address; hostnames mixed with addresses; no endpoint (warnings)
    have |= ctx.peer_sites
    named = [*order, *(site for site, _ in weights or ())]
    if not have.issuperset(named):
        raise _SLOW  # "no endpoint has site ..."
    if locality_names and not any(e.locality.region for e in endpoints):
        raise _SLOW
    if policy is PolicyName.GEO and not ctx.can_locate:
        raise _SLOW
    if keys is not None and keys != len(obj) + sum(map(len, items)) + (len(weights) if weights else 0):
        raise _SLOW  # the text has more keys than the object: a key was given twice
    service = Service(
        name=name,
        zone=origin,
        label=relative_to(name, origin),
        policy=policy,
        failover_order=order,
        weights=weights,
        ttl=_int(get("ttl", _ABSENT), info.zone.ttl, 0),
        max_answers=_int(get("max_answers", _ABSENT), 8, 1, sys.maxsize),
        all_down=all_down,
        fallback=_fallback(get("fallback", _ABSENT), all_down),
        locality_names=locality_names,
        endpoints=endpoints,
    )
    sites = tuple(dict.fromkeys([*named, *(e.site for e in endpoints)]))
    for site in sites:  # only now that the service is made: the effects of the located validator
        ctx.sites_used.setdefault(site)
    ctx.checks.used.update(used)
    return service, sites


def fast_service(ctx: ServiceContext, obj: dict[str, object], keys: int | None = None) -> FastItem | None:
    """The service `obj` gives and the sites it names, or None when it must be validated the located
    way (nothing is changed then). `keys`: how many keys the text of `obj` has, when duplicate keys may
    have been dropped by the decoder (JSON); the service is then made only when the object has them all."""
    if not ctx.fast:
        return None
    try:
        return _service(ctx, obj, keys)
    except _Slow:
        return None


def plain_map(node: Map) -> dict[str, object]:
    """A marked YAML mapping as plain values (its keys are unique already)."""
    return {entry.key: _plain(entry.value) for entry in node.entries}


def _plain(node: Node) -> object:
    if type(node) is Scalar:
        return node.value
    if type(node) is Map:
        return {entry.key: _plain(entry.value) for entry in node.entries}
    if type(node) is Seq:
        return [_plain(item) for item in node.items]
    return _ABSENT
