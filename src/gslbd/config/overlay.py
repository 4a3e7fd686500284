"""The endpoint overlay (model/overlay.py) validated and merged into a Config (pure: no I/O).

    read_endpoint_value(config, service, value)   one endpoint mapping read by the config's own endpoint
                                                  reader (config/services.py); (Endpoint | None, problems)
    read_patch(config, endpoint, fields)          a config endpoint with some keys replaced, validated the
                                                  same way
    merge(config, overlay) -> Merged              config services + overlay -> services; entries the
                                                  config makes invalid are dropped, each with its reason

An added endpoint is validated as an item of the service's `endpoints:` would be, against the config's
check profiles, sites and localities. Without `check` it gets the check the service's config endpoints
all have (what the service's `check:` gives them), else none. An inline check of type exec is refused: it
would let whoever holds the API token run a command the config file does not name (a profile of the
config may be exec). A problem's `path` is the endpoint key that is wrong ("weight", "check.interval");
`file` is "endpoint".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gslbd.config.checks import CheckRef
from gslbd.config.fields import MapReader, Report
from gslbd.config.loader import Entry, Map, Node, Scalar, Seq
from gslbd.config.service_context import ServiceContext
from gslbd.config.service_keys import ENDPOINT_KEYS
from gslbd.config.services import read_endpoint
from gslbd.errors import Problem
from gslbd.model.check import Check
from gslbd.model.config import Config
from gslbd.model.load import LoadSource
from gslbd.model.overlay import Overlay, OverlayEntry, OverlayOp
from gslbd.model.service import Endpoint, EndpointKey, Service
from gslbd.model.topology import Locality, SiteInfo
from gslbd.types import CheckType, EndpointKind

SOURCE = "endpoint"
MIXED = "mixes hostname and IP endpoints: a hostname picked first is answered alone (CNAME)"
EXEC_REFUSED = (
    "an inline exec check is not taken from the API (it would run a command the config file does not "
    "name); name a check profile of the config"
)
PATCH_KEYS = tuple(k for k in ENDPOINT_KEYS if k != "address")


@dataclass(frozen=True, slots=True)
class Dropped:
    """An overlay entry the config does not allow (any more): `reason` says why."""

    key: EndpointKey
    entry: OverlayEntry
    reason: str

    def text(self) -> str:
        return f"{self.entry.op.value} of {self.key[0]} {self.key[1]} dropped: {self.reason}"


@dataclass(frozen=True, slots=True)
class Merged:
    """The config with the overlay applied. `sources`: "overlay" for each added endpoint's key;
    `patched`: the keys each patched config endpoint has replaced; `removed`: the config endpoints the
    overlay leaves out, by service; `dropped`: the entries not applied."""

    config: Config
    kept: Mapping[EndpointKey, OverlayEntry] = field(default_factory=dict)
    added: frozenset[EndpointKey] = frozenset()
    patched: Mapping[EndpointKey, tuple[str, ...]] = field(default_factory=dict)
    removed: Mapping[str, tuple[Endpoint, ...]] = field(default_factory=dict)
    dropped: tuple[Dropped, ...] = ()


def _node(value: object) -> Node:
    """A plain JSON value as the marked tree the config readers take (every line 1)."""
    if isinstance(value, dict):
        return _map(value)
    if isinstance(value, list):
        return Seq(1, tuple(_node(v) for v in value))
    return Scalar(1, value)


def _map(value: Mapping[str, object]) -> Map:
    return Map(1, tuple(Entry(str(k), 1, _node(v)) for k, v in value.items()))


def _context(config: Config, rep: Report) -> ServiceContext:
    profiles = {c.name: (c, f"checks.{c.name}") for c in config.checks}
    localities = {s.name: s.locality for s in config.sites}
    return ServiceContext(
        rep=rep,
        zones=[],
        checks=CheckRef(rep, profiles, set(profiles)),
        this_site=config.site.name,
        site_locality=lambda site: localities.get(site, Locality()),
        peer_sites={p.name for p in config.peers.sites} if config.peers is not None else set(),
        can_locate=bool(config.topology.networks) or config.topology.geoip_database is not None,
    )


def _report(config: Config) -> Report:
    source = config.source
    base = Path(source).parent if not source.startswith("<") else Path.cwd()
    return Report(SOURCE, base)


def shared_check(service: Service) -> Check | None:
    """The check every config endpoint of `service` has (None when they differ or there are none)."""
    checks = {e.check for e in service.endpoints}
    return checks.pop() if len(checks) == 1 else None


def shared_load(service: Service) -> LoadSource | None:
    """The load source every config endpoint of `service` has (None when they differ or there are none):
    what an endpoint added through the overlay reads, like the service's endpoints."""
    loads = {e.load for e in service.endpoints}
    return loads.pop() if len(loads) == 1 else None


def errors_of(problems: Sequence[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def problem_text(problem: Problem) -> str:
    """ "weight: must be at most 1000, got 5000" (the field, then what is wrong)."""
    return f"{problem.path}: {problem.message}" if problem.path else problem.message


def read_endpoint_value(
    config: Config, service: Service, value: object
) -> tuple[Endpoint | None, list[Problem]]:
    """One endpoint mapping of `service`, read as the config reads an item of its `endpoints:`; the
    endpoint is None when there is an error (every problem, warnings too, is in the list)."""
    rep = _report(config)
    if not isinstance(value, dict):
        rep.error(None, "", 'an endpoint must be a mapping like {"address": "192.0.2.10", "site": "eu"}')
        return None, rep.problems
    check = value.get("check")
    if isinstance(check, dict) and check.get("type") == CheckType.EXEC.value:
        rep.error(None, "check.type", EXEC_REFUSED)
        return None, rep.problems
    ctx = _context(config, rep)
    reader = MapReader(rep, _map(value), "", 1)
    endpoint = read_endpoint(
        ctx, reader, service.name, shared_check(service), default_load=shared_load(service)
    )
    if endpoint is not None and not errors_of(rep.problems):
        hostname = endpoint.kind is EndpointKind.HOSTNAME
        if service.https is not None and hostname:
            rep.error(None, "address", "the service has an HTTPS record, which needs address endpoints")
        if {e.kind is EndpointKind.HOSTNAME for e in service.endpoints} | {hostname} == {True, False}:
            rep.warn(None, "address", MIXED)
    return (endpoint if not errors_of(rep.problems) else None), rep.problems


def read_patch(
    config: Config, service: Service, endpoint: Endpoint, fields: Mapping[str, object]
) -> tuple[Endpoint | None, list[Problem]]:
    """`endpoint` (of the config) with the keys of `fields` replaced, each validated as in the config;
    None when there is an error. `address` cannot be patched."""
    rep = _report(config)
    for key in fields:
        if key not in PATCH_KEYS:
            hint = (
                "the address cannot be patched: remove the endpoint and add another"
                if key == "address"
                else ("valid keys: " + ", ".join(PATCH_KEYS))
            )
            rep.error(None, key, f"unknown key '{key}'; {hint}")
    if not fields:
        rep.error(None, "", "nothing to patch: give at least one of " + ", ".join(PATCH_KEYS))
    if errors_of(rep.problems):
        return None, rep.problems
    found, problems = read_endpoint_value(config, service, {"address": endpoint.address, **fields})
    if found is None:
        return None, problems
    changes = {key: getattr(found, key) for key in fields}  # each endpoint key is the attribute's name
    if "site" in fields and "locality" not in fields:
        changes["locality"] = found.locality  # the new site's, as the config reader gives it
    return replace(endpoint, **changes), problems


def _by_service(overlay: Overlay) -> dict[str, list[tuple[str, OverlayEntry]]]:
    out: dict[str, list[tuple[str, OverlayEntry]]] = {}
    for (service, address), entry in sorted(overlay.items()):
        out.setdefault(service, []).append((address, entry))
    return out


def _first_error(problems: Sequence[Problem]) -> str:
    return "; ".join(problem_text(p) for p in errors_of(problems))


def merge(config: Config, overlay: Overlay) -> Merged:
    """`config` with `overlay` applied (see Merged). An entry is dropped when its service is gone, when
    a remove or patch names an address the config has not (any more), when an add names one the config
    has now, or when its fields do not validate under `config`."""
    if not overlay:
        return Merged(config)
    pending = _by_service(overlay)
    kept: dict[EndpointKey, OverlayEntry] = {}
    dropped: list[Dropped] = []
    added: set[EndpointKey] = set()
    patched: dict[EndpointKey, tuple[str, ...]] = {}
    removed: dict[str, tuple[Endpoint, ...]] = {}
    services: list[Service] = []
    for service in config.services:
        entries = pending.pop(service.name, None)
        if not entries:
            services.append(service)
            continue
        endpoints = {e.address: e for e in service.endpoints}
        configured_addresses = set(endpoints)
        gone: list[Endpoint] = []
        for address, entry in entries:
            key = (service.name, address)
            configured = endpoints.get(address) if entry.op is not OverlayOp.ADD else None
            if entry.op is OverlayOp.ADD:
                if address in configured_addresses:
                    dropped.append(Dropped(key, entry, "the config has this endpoint now"))
                    continue
                made, problems = read_endpoint_value(config, service, dict(entry.fields))
                if made is None or made.address != address:
                    dropped.append(Dropped(key, entry, _first_error(problems) or "address differs"))
                    continue
                endpoints[address] = made
                added.add(key)
            elif configured is None:
                dropped.append(Dropped(key, entry, "the config has no such endpoint (any more)"))
                continue
            elif entry.op is OverlayOp.REMOVE:
                del endpoints[address]
                gone.append(configured)
            else:
                made, problems = read_patch(config, service, configured, entry.fields)
                if made is None:
                    dropped.append(Dropped(key, entry, _first_error(problems)))
                    continue
                endpoints[address] = made
                patched[key] = tuple(entry.fields)
            kept[key] = entry
        if gone:
            removed[service.name] = tuple(gone)
        services.append(replace(service, endpoints=tuple(endpoints.values())))
    for name, entries in pending.items():
        for address, entry in entries:
            dropped.append(Dropped((name, address), entry, f"the config has no service {name}"))
    return Merged(
        _with_sites(replace(config, services=tuple(services))),
        kept,
        frozenset(added),
        patched,
        removed,
        tuple(dropped),
    )


def _with_sites(config: Config) -> Config:
    """Every site an endpoint names is a known site (as the config reader makes them)."""
    known = {s.name for s in config.sites}
    extra = dict.fromkeys(e.site for s in config.services for e in s.endpoints if e.site not in known)
    if not extra:
        return config
    return replace(config, sites=(*config.sites, *(SiteInfo(name) for name in extra)))
