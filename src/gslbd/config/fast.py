"""The fast path of service validation: a service in the common shape, from plain values (a decoded JSON
object, or a YAML mapping made plain) straight to the model, with direct dict access and cheap checks.

It knows a narrow shape: the keys in `_SERVICE_KEYS` and `_ENDPOINT_KEYS` (no `zone`, `locality`,
`https`, `srv` or the delays; `ttl` only as a number), `check` only as `none` or the name of a valid
profile, and no null values. Whatever
it does not know, and anything the located validator (config/services.py) would report as an error or a
warning, makes it give up (None): the caller then validates that service the located way, so every
problem is still reported at its file:line:field, worded as before. A service it does make is equal
(==) to the one the located validator makes, with the same effects on the context (the sites named, the
check profiles used), applied only once it has succeeded. tests/unit/config/test_fast_path.py holds the
two paths to that, for valid and broken services alike.

The commonest shape of all (what a fleet's generated services file is made of: IP endpoints with at most
a site, no fallback) is read in C first when `gslbd.config._cshape` is compiled (`_cshape.c` says which
shape): the same result as `_service` for it, in a fifth of the time, and None for anything else, which
`_service` then reads. `GSLBD_NATIVE=0` leaves it unused, as it does the C answer table.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from types import SimpleNamespace

from gslbd.config.fields import SITE_NAME, TTL_MAX, Invalid
from gslbd.config.loader import Map, Node, Scalar, Seq
from gslbd.config.makers import EndpointDraft, ServiceDraft, made_endpoint, made_service
from gslbd.config.min_healthy import min_healthy_value, min_healthy_warning
from gslbd.config.names import make_name, target_text
from gslbd.config.service_context import MAX_EXCHANGE_LABEL, ServiceContext, served_zones, zone_of
from gslbd.config.service_keys import ENDPOINT_KEYS, SERVICE_KEYS
from gslbd.config.tags import tags_value
from gslbd.config.zones import RESERVED_PREFIXES, ZoneInfo
from gslbd.model.check import Check
from gslbd.model.load import WeightFrom
from gslbd.model.service import Endpoint, MinHealthy, Service
from gslbd.model.topology import Locality
from gslbd.types import AdminState, AllDown, EndpointKind, PolicyName, Select

try:
    from gslbd.config import _cshape
except ImportError:  # not compiled here (setup.py builds it where it can): the Python fast path alone
    _cshape = None  # type: ignore[assignment]

# The located validator's keys but those the fast path leaves to it.
# Rare keys are read the located way (the fast readers make none of them): delays, bias, select, pools,
# load feedback.
_SERVICE_KEYS = frozenset(SERVICE_KEYS) - {
    "zone",
    "https",
    "srv",
    "bias",
    "select",
    "pools",
    "rules",
    "failover_delay",
    "failback_delay",
    "health",
    "load",
    "weight_from",
    "shed_load",
}
_ENDPOINT_KEYS = frozenset(ENDPOINT_KEYS) - {"locality", "checks", "health", "load"}
_POLICIES = {p.value: p for p in PolicyName}
_ALL_DOWN = {a.value: a for a in AllDown}
_ADMIN = {a.value: a for a in AdminState}
_NONE = "none"
_ABSENT = object()
_MAX_INT = sys.maxsize
# An absolute name as check_absolute accepts it, already lower case (a wildcard only as first label).
_NAME = re.compile(r"(?:\*\.)?(?:[a-z0-9_-]{1,63}\.)+\Z")
_MAX_NAME = 254
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}\Z")  # the normal form, as names.target_text
# inet_pton reads IPv4 in exactly that form (four decimal octets up to 255, no leading zero) in a third
# of the time; test_fast_path.py holds the two to the same answers.
_AF_INET = socket.AF_INET
_IPV4_KIND = EndpointKind.IPV4
_HOSTNAME = EndpointKind.HOSTNAME
_IPV6_KIND = EndpointKind.IPV6
_OBEY = AdminState.OBEY
_ENDPOINT = Endpoint
_ADDRESS = attrgetter("address")
_SITE = attrgetter("site")

FastItem = tuple[Service, tuple[str, ...]]  # a service and the sites it names, in validation order
# The keys the C reader reads (fallback is left to `_service`).
_COMMON_KEYS = _SERVICE_KEYS - {"fallback"}


class _Slow(Exception):
    """The service is not in the shape the fast path knows: validate it the located way."""


_SLOW = _Slow()


@dataclass(slots=True)
class FastIndex:
    """What the fast path looks up, made once per context (which does not change while services are
    read, except for the sites and profiles used, which the fast path adds to)."""

    served: dict[str, ZoneInfo]
    single: str | None  # the origin relative names are in (only when there is exactly one zone)
    profiles: Mapping[str, tuple[Check, str]]
    this_site: str
    peer_sites: set[str]
    can_locate: bool
    site_of: dict[str, tuple[str, Locality]]  # site names already validated -> (interned, locality)
    here: tuple[str, Locality]  # this site (the default of an endpoint's site) and its locality
    # The C reader of the commonest shape, or None (not compiled, or GSLBD_NATIVE=0).
    common: Callable[[dict[str, object], int | None], FastItem | None] | None = None


def _index(ctx: ServiceContext) -> FastIndex:
    index = ctx.fast_index
    if index is None:
        index = ctx.fast_index = FastIndex(
            served=served_zones(ctx),
            single=ctx.zones[0].zone.origin if len(ctx.zones) == 1 else None,
            profiles=ctx.checks.profiles,
            this_site=ctx.this_site,
            peer_sites=ctx.peer_sites,
            can_locate=ctx.can_locate,
            site_of={},
            here=(ctx.this_site, ctx.site_locality(ctx.this_site)),
        )
        if native_reader():
            index.common = _common_reader(ctx, index)
    return index


def native_reader() -> bool:
    """Whether the commonest shape is read in C (compiled here, and not switched off by GSLBD_NATIVE=0,
    the switch of the C answer table)."""
    return _cshape is not None and os.environ.get("GSLBD_NATIVE", "1") != "0"


def _common_reader(
    ctx: ServiceContext, index: FastIndex
) -> Callable[[dict[str, object], int | None], FastItem | None]:
    """The C reader over this context."""
    return _cshape.Reader(_reader_spec(ctx, index))


def _reader_spec(ctx: ServiceContext, index: FastIndex) -> SimpleNamespace:
    """What the C reader is made of: the model classes and enum members it makes services of, the
    index's lookups and the context's records of the sites and profiles used (shared, not copied), and
    `_new_site` for a site it has not met."""
    profiles = index.profiles
    return SimpleNamespace(
        service_type=Service,
        endpoint_type=Endpoint,
        keys=_COMMON_KEYS,
        policies=_POLICIES,
        all_downs=_ALL_DOWN,
        failover=PolicyName.FAILOVER,
        weighted=PolicyName.WEIGHTED,
        geo=PolicyName.GEO,
        fallback=AllDown.FALLBACK,
        ipv4=_IPV4_KIND,
        ipv6=_IPV6_KIND,
        obey=_OBEY,
        rotate=Select.ROTATE,
        weight_config=WeightFrom.CONFIG,
        reserved=RESERVED_PREFIXES,
        max_exchange_label=MAX_EXCHANGE_LABEL,
        ttl_max=TTL_MAX,
        served=index.served,
        profiles=profiles if type(profiles) is dict else dict(profiles),
        site_of=index.site_of,
        here=index.here,
        peer_sites=index.peer_sites,
        can_locate=index.can_locate,
        new_site=partial(_new_site, index.site_of, ctx.site_locality),  # holds neither ctx nor index
        min_healthy=partial(_min_healthy, index.peer_sites),
        slow=(_Slow, TypeError),
        sites_used=ctx.sites_used,
        checks_used=ctx.checks.used,
    )


def ipv6_text(text: str) -> str | None:
    """The text `ipaddress` gives for an IPv6 address in the usual form (hex groups, at most one `::`),
    made by the C library's inet_pton/inet_ntop (a microsecond, not ipaddress's ten); None for anything
    else (not IPv6, an embedded IPv4 address or a scope, a form the two libraries could read
    differently): ask ipaddress then. The two write this form alike: lower case, no leading zeros, the
    longest run of two or more zero groups (the first of equal runs) as `::`."""
    if "." in text or "%" in text or ":" not in text:
        return None
    try:
        packed = socket.inet_pton(socket.AF_INET6, text)
    except (OSError, ValueError):  # ValueError: a NUL, or not ASCII (UnicodeEncodeError)
        return None
    if "::" in text:  # ipaddress wants `::` to stand for at least one group
        groups = text.count(":") - text.startswith("::") - text.endswith("::")
        if groups > 7:
            return None
    out = socket.inet_ntop(socket.AF_INET6, packed)
    return None if "." in out else out


def _target(value: object) -> tuple[str, EndpointKind]:
    """As names.target: an address (normalized) or a hostname, with its kind."""
    if type(value) is not str:
        raise _SLOW
    if _IPV4.match(value):
        return value, _IPV4_KIND
    quick = ipv6_text(value.strip())
    if quick is not None:
        return quick, EndpointKind.IPV6
    try:
        return target_text(value)
    except Invalid:
        raise _SLOW from None


def _site_of(ctx: ServiceContext, index: FastIndex, value: object) -> tuple[str, Locality]:
    """A site name (validated, interned) and its locality."""
    found = index.site_of.get(value)  # type: ignore[call-overload]  # unhashable: TypeError
    if found is None:
        found = _new_site(index.site_of, ctx.site_locality, value)
    return found  # type: ignore[no-any-return]


def _new_site(
    site_of: dict[str, tuple[str, Locality]], site_locality: Callable[[str], Locality], value: object
) -> tuple[str, Locality]:
    """A site not met before, validated, interned and recorded in `site_of`."""
    if type(value) is not str or not SITE_NAME.match(value):
        raise _SLOW
    site = sys.intern(value)
    found = site_of[site] = (site, site_locality(site))
    return found


def _int(value: object, lo: int, hi: int) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise _SLOW
    return value


def _tags(value: object) -> tuple[str, ...]:
    """`tags:` read as the located reader reads it (config/tags.py); a bad one is left to it."""
    try:
        return tags_value(value)
    except Invalid:
        raise _SLOW from None


def _check(index: FastIndex, value: object, used: list[str]) -> Check | None:
    """A `check:` value: `none`, or the name of a valid profile (recorded in `used`)."""
    if type(value) is not str:
        raise _SLOW
    if value == _NONE:
        return None
    found = index.profiles.get(value)
    if found is None:
        raise _SLOW
    used.append(value)
    return found[0]


def _name(index: FastIndex, value: object) -> tuple[str, ZoneInfo]:
    """(the absolute name, its zone), when it can be a service."""
    if type(value) is not str:
        raise _SLOW
    name = value.lower()
    if not _NAME.match(name) or len(name) > _MAX_NAME:
        text = value.strip()
        absolute = text.endswith(".")
        if text == "@" or (not absolute and index.single is None):
            raise _SLOW
        try:
            name = make_name(text, None if absolute else index.single, wildcard=True)
        except Invalid:
            raise _SLOW from None
    info = zone_of(index.served, name)
    if info is None or name == info.zone.origin or name in info.owners:
        raise _SLOW  # outside every zone; the apex; a static record's name
    first = name[: name.find(".")]
    if len(first) > MAX_EXCHANGE_LABEL or first.startswith(RESERVED_PREFIXES):
        raise _SLOW
    return name, info


def _endpoint(
    ctx: ServiceContext,
    index: FastIndex,
    item: dict[str, object],
    name: str,
    default: Check | None,
    used: list[str],
) -> Endpoint:
    """An endpoint with more than an address and a site."""
    if not _ENDPOINT_KEYS.issuperset(item):
        raise _SLOW
    address, kind = _target(item.get("address"))
    site, locality = _site_of(ctx, index, item["site"]) if "site" in item else index.here
    probe: str | None = None
    if "probe_address" in item:
        probe, probe_kind = _target(item["probe_address"])
        if probe_kind is _HOSTNAME:
            raise _SLOW
    admin = _ADMIN.get(item["admin"]) if "admin" in item else _OBEY  # type: ignore[call-overload]
    if admin is None:
        raise _SLOW
    return made_endpoint(
        EndpointDraft(
            name,
            address,
            kind,
            site,
            locality,
            _int(item["weight"], 0, 1000) if "weight" in item else 1,
            _int(item["priority"], 0, _MAX_INT) if "priority" in item else 0,
            _check(index, item["check"], used) if "check" in item else default,
            probe,
            admin,
            _tags(item["tags"]) if "tags" in item else (),
        )
    )


def _service(ctx: ServiceContext, obj: dict[str, object], keys: int | None) -> FastItem:
    if not _SERVICE_KEYS.issuperset(obj):
        raise _SLOW
    index = ctx.fast_index or _index(ctx)
    name, info = _name(index, obj.get("name"))
    get = obj.get
    policy = _POLICIES.get(get("policy", "round_robin"))  # type: ignore[call-overload]
    all_down = _ALL_DOWN.get(get("all_down", "serve_all"))  # type: ignore[call-overload]
    locality_names = get("locality_names", False)
    if policy is None or all_down is None or type(locality_names) is not bool:
        raise _SLOW
    if locality_names and name.startswith("*."):
        raise _SLOW  # an error: a wildcard service has no locality names
    named: list[str] = []
    order: tuple[str, ...] = ()
    if "failover_order" in obj:
        given = obj["failover_order"]
        if policy is not PolicyName.FAILOVER or type(given) is not list or not given:
            raise _SLOW
        order = tuple([_site_of(ctx, index, site)[0] for site in given])
        if len(set(order)) != len(order):
            raise _SLOW
        named += order
    weights: tuple[tuple[str, int], ...] | None = None
    if "weights" in obj:
        given = obj["weights"]
        if policy is not PolicyName.WEIGHTED or type(given) is not dict or not given:
            raise _SLOW
        weights = tuple(
            [(_site_of(ctx, index, site)[0], _int(weight, 0, 1000)) for site, weight in given.items()]
        )
        if not any(weight for _, weight in weights):
            raise _SLOW  # a warning: every weight is 0
        named += [site for site, _ in weights]
    used: list[str] = []
    default = _check(index, obj["check"], used) if "check" in obj else None
    items = get("endpoints", [])
    if type(items) is not list:
        raise _SLOW
    endpoints: list[Endpoint] = []
    hostnames = 0
    key_count = len(obj)
    site_of = index.site_of
    pton = socket.inet_pton
    draft = EndpointDraft
    add = endpoints.append
    for item in items:
        if type(item) is not dict:
            raise _SLOW
        size = len(item)
        key_count += size
        address: object = item.get("address")
        if size <= 2 and type(address) is str and (size == 1 or "site" in item):  # the common shape
            if ":" in address:
                quick = ipv6_text(address)
                if quick is None:
                    add(_endpoint(ctx, index, item, name, default, used))
                    hostnames += endpoints[-1].kind is _HOSTNAME
                    continue
                address, kind = quick, _IPV6_KIND
            else:
                try:
                    pton(_AF_INET, address)  # an IPv4 address in its normal form
                except (OSError, ValueError):
                    add(_endpoint(ctx, index, item, name, default, used))
                    hostnames += endpoints[-1].kind is _HOSTNAME
                    continue
                kind = _IPV4_KIND
            found = (
                (site_of.get(item["site"]) or _site_of(ctx, index, item["site"])) if size == 2 else index.here
            )
            # made_endpoint inline (400,000 calls fewer): a draft given the class Endpoint (makers.py)
            endpoint = draft(name, address, kind, found[0], found[1], 1, 0, default, None, _OBEY, ())
            endpoint.__class__ = _ENDPOINT  # type: ignore[assignment]
            add(endpoint)  # type: ignore[arg-type]
        else:
            add(_endpoint(ctx, index, item, name, default, used))
            hostnames += endpoints[-1].kind is _HOSTNAME
    addresses = set(map(_ADDRESS, endpoints))
    have = dict.fromkeys(map(_SITE, endpoints))  # the sites of the endpoints, in order
    if len(addresses) != len(endpoints):
        raise _SLOW  # an error: a duplicate address
    if 0 < hostnames < len(endpoints) or not (endpoints or index.peer_sites):
        raise _SLOW  # warnings: hostnames mixed with addresses; no endpoints
    if (
        named
        and not all(map(have.__contains__, named))
        and not all(site in have or site in index.peer_sites for site in named)
    ):
        raise _SLOW  # a warning: no endpoint has a site of failover_order or weights
    if locality_names and not any(e.locality.region for e in endpoints):
        raise _SLOW  # a warning: no locality names are made
    if policy is PolicyName.GEO and not index.can_locate:
        raise _SLOW  # a warning: nothing locates clients
    fallback: tuple[str, ...] = ()
    if "fallback" in obj or all_down is AllDown.FALLBACK:
        fallback = _fallback(obj.get("fallback"), all_down)
    min_healthy = None
    if "min_healthy" in obj:
        min_healthy = _min_healthy(index.peer_sites, obj["min_healthy"], endpoints)
        if min_healthy is None:
            raise _SLOW
    if keys is not None and keys != key_count + (len(weights) if weights else 0):
        raise _SLOW  # the text has more keys than the object: a key given twice
    origin = info.zone.origin
    service = made_service(
        ServiceDraft(
            name,
            origin,
            name[: len(name) - len(origin) - 1] if origin != "." else name[:-1],
            policy,
            order,
            weights,
            _int(obj["ttl"], 0, TTL_MAX) if "ttl" in obj else info.zone.ttl,
            _int(obj["max_answers"], 1, _MAX_INT) if "max_answers" in obj else 8,
            all_down,
            fallback,
            locality_names,
            tuple(endpoints),
            None,
            None,
            min_healthy,
        )
    )
    sites = have
    if named:  # every site named, in the located validator's order
        sites = dict.fromkeys(named)
        sites.update(have)
    used_sites = ctx.sites_used
    if not used_sites.keys() >= sites.keys():  # only now that the service is made: its effects
        for site in sites:
            used_sites.setdefault(site)
    if used:
        ctx.checks.used.update(used)
    return service, tuple(sites)


def _fallback(value: object, all_down: AllDown) -> tuple[str, ...]:
    if all_down is not AllDown.FALLBACK or type(value) is not list or not value:
        raise _SLOW  # an error (none with all_down: fallback) or a warning (unused)
    found = [_target(item) for item in value]
    if len(found) > 1 and any(kind is _HOSTNAME for _, kind in found):
        raise _SLOW
    return tuple(dict.fromkeys(address for address, _ in found))


def _min_healthy(peer_sites: set[str], value: object, endpoints: Collection[Endpoint]) -> MinHealthy | None:
    """`min_healthy` read by config/min_healthy.py (for `_service` and the C reader), or None when the
    located validator would report it (an error or a warning): not this path's."""
    try:
        found = min_healthy_value(value)
    except Invalid:
        return None
    return found if min_healthy_warning(found, endpoints, peer_sites) is None else None


def fast_service(ctx: ServiceContext, obj: dict[str, object], keys: int | None = None) -> FastItem | None:
    """The service `obj` gives and the sites it names, or None when it must be validated the located
    way (nothing is changed then). `keys`: how many keys the text of `obj` has at least, when duplicate
    keys may have been dropped by the decoder (JSON): the service is made only when the object has them
    all."""
    index = ctx.fast_index or _index(ctx)
    if index.common is not None:
        found = index.common(obj, keys)
        if found is not None:
            return found
    try:
        return _service(ctx, obj, keys)
    except (_Slow, TypeError):  # TypeError: an unhashable value looked up (a list as a policy)
        # Each raise of the one _SLOW would add its frames to the traceback this catch leaves on it:
        # without this, every service the fast path gave up on kept about 2 kB for good.
        _SLOW.__traceback__ = None
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
