"""Model objects made fast (config/fast.py): a frozen dataclass's __init__ sets each field through
object.__setattr__, which was half the cost of a service at 100,000 services. Here a plain class with the
same slots (a draft) is made by an ordinary __init__, one cheap store per field, and then given the
model's class: Python allows that between classes of the same layout, and the object is then exactly
the one the model's constructor makes (==, hash, pickle), in a third of the time. Nothing but __init__
may set the model classes' fields (no __post_init__) and the drafts must have their slots, in order,
which is checked at import; tests/unit/config/test_fast_path.py compares the objects made here with the
located validator's."""

from __future__ import annotations

from dataclasses import fields

from gslbd.model.check import Check
from gslbd.model.load import WeightFrom
from gslbd.model.service import Endpoint, MinHealthy, Pool, Rule, Service
from gslbd.model.topology import Locality
from gslbd.types import AdminState, AllDown, EndpointKind, PolicyName, Select

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
    "tags",
    "checks",
    "load",
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
    "min_healthy",
    "bias",
    "select",
    "pools",
    "rules",
    "failover_delay",
    "failback_delay",
    "ttl_range",
    "weight_from",
    "shed_load",
)


class EndpointDraft:
    """An Endpoint under construction: the same slots, set by a plain __init__ (one fast store each),
    then given the class Endpoint (`draft.__class__ = Endpoint`: the layouts are the same, so the
    object only changes class). Every slot must be set before (config/fast.py does so inline)."""

    __slots__ = _ENDPOINT_FIELDS

    def __init__(
        self,
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
        tags: tuple[str, ...] = (),
        checks: None = None,
    ) -> None:
        self.service = service
        self.address = address
        self.kind = kind
        self.site = site
        self.locality = locality
        self.weight = weight
        self.priority = priority
        self.check = check
        self.probe_address = probe_address
        self.admin = admin
        self.tags = tags
        self.checks = checks
        self.load = None  # the fast paths read endpoints without load feedback


class ServiceDraft:
    """A Service under construction (see EndpointDraft)."""

    __slots__ = _SERVICE_FIELDS

    def __init__(
        self,
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
        min_healthy: MinHealthy | None,
        bias: tuple[tuple[str, int], ...] = (),
        select: Select = Select.ROTATE,
        pools: tuple[Pool, ...] = (),
        rules: tuple[Rule, ...] = (),
    ) -> None:
        self.name = name
        self.zone = zone
        self.label = label
        self.policy = policy
        self.failover_order = failover_order
        self.weights = weights
        self.ttl = ttl
        self.max_answers = max_answers
        self.all_down = all_down
        self.fallback = fallback
        self.locality_names = locality_names
        self.endpoints = endpoints
        self.https = https
        self.srv = srv
        self.min_healthy = min_healthy
        self.bias = bias
        self.select = select
        self.pools = pools
        self.rules = rules
        self.failover_delay = 0.0  # the fast paths read services without delays
        self.failback_delay = 0.0
        self.ttl_range = None
        self.weight_from = WeightFrom.CONFIG
        self.shed_load = None


def _same_layout(kind: type, draft: type) -> None:
    """`draft` must have exactly the slots of the frozen dataclass `kind`, whose fields nothing but its
    __init__ may set (no __post_init__): then a draft with every slot set, given `kind` as its class,
    is the object `kind(...)` makes."""
    names = tuple(f.name for f in fields(kind))
    slots = (getattr(kind, "__slots__", None), getattr(draft, "__slots__", None))
    if slots != (names, names) or hasattr(kind, "__post_init__"):
        raise RuntimeError(f"config/makers.py does not know the fields of {kind.__name__} any more")


_same_layout(Endpoint, EndpointDraft)
_same_layout(Service, ServiceDraft)


def made_endpoint(draft: EndpointDraft) -> Endpoint:
    """The draft, every slot set, as the Endpoint it is."""
    draft.__class__ = Endpoint  # type: ignore[assignment]
    return draft  # type: ignore[return-value]


def made_service(draft: ServiceDraft) -> Service:
    """The draft, every slot set, as the Service it is."""
    draft.__class__ = Service  # type: ignore[assignment]
    return draft  # type: ignore[return-value]
