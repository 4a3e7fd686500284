"""What a running gslbd offers its HTTP API, as a Protocol the composition root implements.

The API layer never imports `app` or `server`: App fills these frozen values and the API renders them.
`endpoint_view` and `service_status` build them from the model and the health book, so App only has to
call them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol

from gslbd.api.changes import ChangeLog
from gslbd.model.overlay import OverlayOp
from gslbd.model.selector import Selector
from gslbd.model.service import Endpoint, Service
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState, PolicyName


class WhatIfRefused(Exception):
    """A what-if the API refuses: `status` 400 (a bad change) or 409 (nothing to replay)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Health(StrEnum):
    """The probed verdict of an endpoint: `unknown` before the first verdict or without a check."""

    UP = "up"
    DOWN = "down"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class CheckView:
    """One check of an endpoint with several (`endpoints[].checks`): its own verdict and last result."""

    name: str
    type: str
    health: Health
    last_check: float | None = None
    last_ok: bool | None = None
    last_detail: str = ""
    last_change: float | None = None
    last_change_reason: str = ""


@dataclass(frozen=True, slots=True)
class EndpointView:
    """One endpoint as the API shows it. Times are wall-clock Unix seconds (None = never).

    `health` is the probed verdict, `admin` the admin state in force (run-time override, else the
    config's), `effective_up` whether the endpoint is a candidate for answers now. `check` names the
    check type probing it (None: not probed). `last_ok`/`last_detail` are the result of the last probe;
    `last_change`/`last_change_reason` when and why the verdict last changed. `source` says where the
    endpoint comes from: "config" (the config file), "overlay" (added through the API) or "peer" (learned
    from a peer site); `patched` names the keys of a config endpoint the overlay replaced ("weight").
    """

    address: str
    site: str
    health: Health
    admin: AdminState
    effective_up: bool
    region: str | None = None
    zone: str | None = None
    check: str | None = None
    last_check: float | None = None
    last_ok: bool | None = None
    last_detail: str = ""
    last_change: float | None = None
    last_change_reason: str = ""
    weight: int = 1
    source: str = "config"
    patched: tuple[str, ...] = ()
    # An endpoint with several checks: `health_mode` (all | any) combines `checks` into `health`.
    health_mode: str | None = None
    checks: tuple[CheckView, ...] = ()
    # Load feedback (docs/policies/load.md): the figure the answers use (None: no figure or no load
    # source), the weight drawn by (weight_from: load and shed_load), and the share of the A/AAAA
    # answers the endpoint is in (None when the answer depends on the client).
    load: float | None = None
    load_weight: int | None = None
    share: float | None = None


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    """A service (absolute `name`, e.g. "app.gslb.example.com.") and the state of its endpoints.
    `removed`: the config endpoints the endpoint overlay leaves out (not answered; shown as such)."""

    name: str
    policy: PolicyName
    endpoints: tuple[EndpointView, ...] = ()
    removed: tuple[EndpointView, ...] = ()

    @property
    def endpoints_up(self) -> int:
        return sum(1 for e in self.endpoints if e.effective_up)


@dataclass(frozen=True, slots=True)
class ServiceRow:
    """A service in one line, for the console's list of thousands: counts instead of endpoint views.

    `endpoints` counts every endpoint shown (configured and learned from peers), `up` those that answer
    now (effective_up), `unhealthy` those whose probed verdict is down, `admin_down`/`admin_up` those
    forced by an admin state. `words` is what the filter searches: name, addresses and sites, lower case.
    """

    name: str
    policy: PolicyName
    endpoints: int
    up: int
    unhealthy: int = 0
    admin_down: int = 0
    admin_up: int = 0
    words: str = ""


def service_row(s: ServiceStatus) -> ServiceRow:
    """The row of a full status (what `Control.rows` must equal, computed the slow way)."""
    eps = s.endpoints
    return ServiceRow(
        name=s.name,
        policy=s.policy,
        endpoints=len(eps),
        up=s.endpoints_up,
        unhealthy=sum(1 for e in eps if e.health is Health.DOWN),
        admin_down=sum(1 for e in eps if e.admin is AdminState.DOWN),
        admin_up=sum(1 for e in eps if e.admin is AdminState.UP),
        words=" ".join([s.name, *(e.address for e in eps), *(e.site for e in eps)]).lower(),
    )


@dataclass(frozen=True, slots=True)
class PeerView:
    """A peer site as the exchange sees it (multi-site, docs/multisite.md).

    `state` is "fresh" (its published endpoints count) or "stale" (they do not: no answer or heartbeat
    within stale_after). `last_answer` is the Unix time of its last complete answer (None: never) and
    `last_answer_age` its age in seconds. `endpoints` counts the addresses learned from it that count
    now, `errors` the queries to it that failed. `failing` is True while its latest poll failed.
    `heartbeat` is the Unix time the peer last evaluated its health (None: it publishes none).
    `heard`: fresh and its latest poll answered; `partitioned`: with peers.quorum, this site hears
    fewer than a majority of the sites, itself included (remote endpoints keep their last agreed
    verdicts).
    """

    name: str
    state: str
    nameservers: tuple[str, ...] = ()
    last_answer: float | None = None
    last_answer_age: float | None = None
    endpoints: int = 0
    errors: int = 0
    polls: int = 0
    failing: bool = False
    detail: str = ""
    heartbeat: float | None = None
    heartbeat_age: float | None = None
    heard: bool = False  # fresh and its latest poll answered (what partition safety counts)
    # peers.quorum: this site hears fewer than a majority of the sites and fails static (the same in
    # every row)
    partitioned: bool = False


@dataclass(frozen=True, slots=True)
class AnswerView:
    """What a client gets for a service name now, and why (the console's "explain in the browser").

    The same resolution as `gslbd explain` (explain.explain and answer.View.resolve with a seeded rng
    and query counter 0). `client` is the address or subnet asked about; `rcode` a mnemonic;
    `answer`/`authority`/`additional` records in presentation form ("name ttl IN type rdata");
    `explanation` the text `gslbd explain` prints.
    """

    name: str
    rtype: str
    client: str
    rcode: str
    answer: tuple[str, ...] = ()
    authority: tuple[str, ...] = ()
    additional: tuple[str, ...] = ()
    location_dependent: bool = False
    explanation: str = ""


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Cluster mode's Redis link (docs/cluster.md). `redis` is the URL without its password;
    `members` counts the instances subscribed to the shared health channel (None while Redis is down)."""

    redis: str
    connected: bool
    instance_id: str
    sync_mode: str
    members: int | None = None


_NO_COUNTS: Mapping[tuple[str, str], int] = MappingProxyType({})
_NO_POLICY: Mapping[str, int] = MappingProxyType({})
_NO_EVENTS: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DnsCounters:
    """DNS counters read at scrape time (plain integers kept by the query path; all cumulative).

    `queries`: responses sent per (transport, rcode), transport "udp" or "tcp", rcode its mnemonic
    ("NOERROR", "NXDOMAIN", "SERVFAIL", "REFUSED", ...).
    `policy_answers`: answers decided by a service's policy, per policy name ("round_robin", ...).
    `events`: other server counters by name (e.g. `ServerStats.as_dict()`: "udp_dropped",
    "tcp_connections", "handler_errors", ...).
    Any mapping may be empty when the instance cannot tell (its metric is then absent).
    """

    queries: Mapping[tuple[str, str], int] = field(default_factory=lambda: _NO_COUNTS)
    policy_answers: Mapping[str, int] = field(default_factory=lambda: _NO_POLICY)
    events: Mapping[str, int] = field(default_factory=lambda: _NO_EVENTS)


class Control(Protocol):
    """The running instance, as the API sees it."""

    @property
    def ready(self) -> bool:
        """False during start-up (before listeners are bound and first verdicts are in) and lame duck."""
        ...

    def services(self) -> Sequence[ServiceStatus]:
        """Every configured service, in config order."""
        ...

    def service(self, name: str) -> ServiceStatus | None:
        """The service with this absolute, lower-case name ("app.gslb.example.com."), or None."""
        ...

    async def set_admin(self, service: str, address: str, state: AdminState, force: bool = False) -> None:
        """Set an endpoint's run-time admin state (persisted in the state store) and apply it to the
        answers. `service` is absolute and lower case; `address` as configured (normalized IP text or
        absolute hostname). Raises KeyError for an unknown service or endpoint, errors.SafetyRefused
        when the change would break a safety rule and `force` is not set."""
        ...

    async def set_admin_bulk(
        self, selector: Selector, state: AdminState, force: bool, dry_run: bool
    ) -> Mapping[str, Any]:
        """Set `state` on every endpoint `selector` picks, in one generation (app/bulk.py); the JSON
        answer of PUT /api/v1/admin (endpoints changed, answers that change). `dry_run` changes nothing.
        ValueError when the selector picks nothing; errors.SafetyRefused and StateError as set_admin."""
        ...

    async def change_endpoints(
        self, op: OverlayOp, service: str, address: str, value: Mapping[str, Any] | None, force: bool
    ) -> Mapping[str, Any]:
        """Add (`op` ADD, `value` the endpoint mapping), remove (REMOVE) or patch (PATCH, `value` the
        keys to replace) an endpoint of `service` through the endpoint overlay, applied in one
        generation and kept in the state store; the JSON answer (service, address, op, generation,
        warnings). config.overlay_change.OverlayRefused (404/409/422), errors.SafetyRefused unless
        `force`, StateError when the store cannot keep it: nothing changed."""
        ...

    async def reload(self, force: bool = False) -> list[str]:
        """Re-read the config file and apply it; returns the error lines (empty = applied). A config
        that would break a safety rule is refused (its lines name the rule) unless `force`."""
        ...

    async def whatif(self, admin: Sequence[str], seed: int) -> Mapping[str, Any]:
        """What pending admin changes ("site=eu down", ...; nothing is applied) would do to the queries
        of the dnstap capture this server writes (log.dnstap.file), replayed through the committed
        generation and the same with the changes: the figures of `gslbd whatif --json`. WhatIfRefused."""
        ...

    def push_health(
        self, service: str, address: str, ok: bool, detail: str, check: str | None = None
    ) -> None:
        """A result for a `type: push` endpoint, applied now (app/push.py). KeyError for an unknown
        service or endpoint, errors.NotPushed when the endpoint is not push-checked here."""
        ...

    def dns_counters(self) -> DnsCounters:
        """The DNS query counters, cumulative since start."""
        ...

    def peers(self) -> Sequence[PeerView]:
        """Every peer site of the multi-site exchange, in config order (empty without `peers`)."""
        ...

    def rows(self) -> Sequence[ServiceRow]:
        """Every configured service as a ServiceRow, in config order (cheaper than `services()`)."""
        ...

    @property
    def rows_version(self) -> int:
        """A number that grows whenever an endpoint's verdict, admin state or counting may have
        changed (a rebuild that touched services, a reload). Lets the API reuse the rows it read for
        the console's list and counts until it changes."""
        ...

    @property
    def changes(self) -> ChangeLog:
        """Recent verdicts, admin changes and reloads (the console's change log and its live events)."""
        ...

    def answer(self, service: str, rtype: str, client_ip: str, ecs: str | None) -> AnswerView:
        """What `client_ip` (or, with `ecs` "net/len", a resolver sending that EDNS Client Subnet)
        gets for `service` (absolute, lower case) and `rtype` ("A", "AAAA", ...) now.
        KeyError for an unknown service."""
        ...

    async def cluster(self) -> ClusterView | None:
        """The Redis link of cluster mode, or None when `cluster` is not configured."""
        ...


def _health(st: EndpointStatus) -> Health:
    return Health.UNKNOWN if st.healthy is None else (Health.UP if st.healthy else Health.DOWN)


def endpoint_view(
    endpoint: Endpoint,
    status: EndpointStatus | None,
    admin: AdminState,
    effective_up: bool,
    source: str = "config",
    patched: tuple[str, ...] = (),
    checks: Sequence[tuple[str, EndpointStatus]] = (),
) -> EndpointView:
    """The API view of `endpoint`: `status` is its health (None = never probed), `admin` the admin
    state in force and `effective_up` the result of `state.snapshot.effective_up`; `source` and
    `patched` as EndpointView has them; `checks` the status of each of its checks when it has several
    (by name, in config order)."""
    st = status if status is not None else EndpointStatus()
    health = _health(st)
    several = endpoint.checks
    if several is not None:
        types = {c.name: c.type.value for c in several.checks}
        views = tuple(
            CheckView(
                name=name,
                type=types.get(name, ""),
                health=_health(part),
                last_check=part.last_check,
                last_ok=part.last_ok,
                last_detail=part.last_detail,
                last_change=part.last_change,
                last_change_reason=part.last_change_reason,
            )
            for name, part in checks
        )
        kinds = ", ".join(dict.fromkeys(types.values()))
        return replace(
            endpoint_view(replace(endpoint, checks=None), status, admin, effective_up, source, patched),
            check=f"{several.health} of {kinds}",
            health_mode=several.health.value,
            checks=views,
        )
    return EndpointView(
        address=endpoint.address,
        site=endpoint.site,
        health=health,
        admin=admin,
        effective_up=effective_up,
        region=endpoint.locality.region,
        zone=endpoint.locality.zone,
        check=endpoint.check.type.value if endpoint.check is not None else None,
        last_check=st.last_check,
        last_ok=st.last_ok,
        last_detail=st.last_detail,
        last_change=st.last_change,
        last_change_reason=st.last_change_reason,
        weight=endpoint.weight,
        source=source,
        patched=patched,
    )


def service_status(
    service: Service, endpoints: Sequence[EndpointView], removed: Sequence[EndpointView] = ()
) -> ServiceStatus:
    return ServiceStatus(
        name=service.name, policy=service.policy, endpoints=tuple(endpoints), removed=tuple(removed)
    )
