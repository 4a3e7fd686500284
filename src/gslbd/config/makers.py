"""Model objects made by their slot setters (config/fast.py): a frozen dataclass's __init__ sets each
field through object.__setattr__, which is half the cost of a service at 100,000 services; setting the
slots directly makes the same object (==) in half the time. Nothing but __init__ may set these classes'
fields (no __post_init__), which is checked at import; tests/unit/config/test_fast_path.py compares the
objects made here with the located validator's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from gslbd.model.check import Check
from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import Locality
from gslbd.types import AdminState, AllDown, EndpointKind, PolicyName

_OBEY = AdminState.OBEY

_ENDPOINT_FIELDS = (
    "service",
    "address",
    "kind",
    "site",
    "locality",
    "weight",
    "priority",
    "check",
    "probe_address",
    "admin",
)
_SERVICE_FIELDS = (
    "name",
    "zone",
    "label",
    "policy",
    "failover_order",
    "weights",
    "ttl",
    "max_answers",
    "all_down",
    "fallback",
    "locality_names",
    "endpoints",
    "https",
    "srv",
)


def _setters(kind: type, names: tuple[str, ...]) -> list[Callable[[object, object], None]]:
    """The slot setters of a frozen dataclass's fields, which must be `names` (in order, all of them)
    and be set by nothing but its __init__."""
    if tuple(f.name for f in fields(kind)) != names or hasattr(kind, "__post_init__"):
        raise RuntimeError(f"config/fast.py does not know the fields of {kind.__name__} any more")
    return [kind.__dict__[name].__set__ for name in names]


# A frozen dataclass's __init__ sets each field through object.__setattr__; setting the slots directly
# makes the same object in half the time (400,000 endpoints at 100,000 services). test_fast_path.py
# compares these with the classes' own constructors.
_E = _setters(Endpoint, _ENDPOINT_FIELDS)
_S = _setters(Service, _SERVICE_FIELDS)
_new = object.__new__


def new_endpoint(
    service: str,
    address: str,
    kind: EndpointKind,
    site: str,
    locality: Locality,
    weight: int,
    priority: int,
    check: Check | None,
    probe_address: str | None,
    admin: AdminState,
    _e: list[Callable[[object, object], None]] = _E,
) -> Endpoint:
    endpoint: Endpoint = _new(Endpoint)
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9 = _e
    s0(endpoint, service)
    s1(endpoint, address)
    s2(endpoint, kind)
    s3(endpoint, site)
    s4(endpoint, locality)
    s5(endpoint, weight)
    s6(endpoint, priority)
    s7(endpoint, check)
    s8(endpoint, probe_address)
    s9(endpoint, admin)
    return endpoint


def plain_endpoint(
    service: str,
    address: str,
    kind: EndpointKind,
    site: tuple[str, Locality],
    check: Check | None,
    _new: Callable[[type[Endpoint]], Endpoint] = _new,
    _class: type[Endpoint] = Endpoint,
    _s0: Callable[[object, object], None] = _E[0],
    _s1: Callable[[object, object], None] = _E[1],
    _s2: Callable[[object, object], None] = _E[2],
    _s3: Callable[[object, object], None] = _E[3],
    _s4: Callable[[object, object], None] = _E[4],
    _s5: Callable[[object, object], None] = _E[5],
    _s6: Callable[[object, object], None] = _E[6],
    _s7: Callable[[object, object], None] = _E[7],
    _s8: Callable[[object, object], None] = _E[8],
    _s9: Callable[[object, object], None] = _E[9],
) -> Endpoint:
    """An endpoint of an address and a site (its locality the site's), with the defaults."""
    endpoint = _new(_class)
    _s0(endpoint, service)
    _s1(endpoint, address)
    _s2(endpoint, kind)
    _s3(endpoint, site[0])
    _s4(endpoint, site[1])
    _s5(endpoint, 1)
    _s6(endpoint, 0)
    _s7(endpoint, check)
    _s8(endpoint, None)
    _s9(endpoint, _OBEY)
    return endpoint


def new_service(
    name: str,
    zone: str,
    label: str,
    policy: PolicyName,
    failover_order: tuple[str, ...],
    weights: tuple[tuple[str, int], ...] | None,
    ttl: int,
    max_answers: int,
    all_down: AllDown,
    fallback: tuple[str, ...],
    locality_names: bool,
    endpoints: tuple[Endpoint, ...],
    https: None,
    srv: None,
    _s: list[Callable[[object, object], None]] = _S,
) -> Service:
    service: Service = _new(Service)
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13 = _s
    s0(service, name)
    s1(service, zone)
    s2(service, label)
    s3(service, policy)
    s4(service, failover_order)
    s5(service, weights)
    s6(service, ttl)
    s7(service, max_answers)
    s8(service, all_down)
    s9(service, fallback)
    s10(service, locality_names)
    s11(service, endpoints)
    s12(service, https)
    s13(service, srv)
    return service
