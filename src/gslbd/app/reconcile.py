"""Pure helpers of the composition root: which endpoints are probed here, which share one probe, which
keep their health across a reload, and how an admin request names an endpoint."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import replace

from gslbd.health.probes.base import answered_host, probe_host
from gslbd.model.check import Check
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, EndpointKey, Service
from gslbd.types import CheckType

# What makes two probes the same: where they connect, what they name (Host header, SNI), whose service
# they run for (exec checks only) and every setting of the check but its name.
TargetKey = tuple[str, str, str, Check]


def probed_endpoints(
    config: Config, services: Iterable[Service] | None = None
) -> dict[EndpointKey, Endpoint]:
    """Endpoints probed by this instance: those with a check, except endpoints of peer sites (their
    health is what that site publishes) unless `peers.quorum` is set (then every site votes on every
    endpoint whose check it can run: state/quorum.py). `services`: only those of `config` (default:
    all)."""
    peers = {p.name for p in config.peers.sites} if config.peers is not None else set()
    voting = config.peers is not None and config.peers.quorum is not None
    out: dict[EndpointKey, Endpoint] = {}
    for svc in config.services if services is None else services:
        for ep in svc.endpoints:
            peer = ep.site != config.site.name and ep.site in peers
            # a peer site's endpoint is probed only to vote on it (one check it can run; an endpoint with
            # several checks is left to its owner)
            if peer and (not voting or ep.check is None or not _votable(ep.check)):
                continue
            if ep.check is not None:
                out[ep.key] = ep
            elif ep.checks is not None:  # several checks: one probed unit each (Endpoint.key)
                for unit in check_units(ep):
                    out[unit.key] = unit
    return out


def loaded_endpoints(config: Config) -> list[Endpoint]:
    """Endpoints whose load this instance fetches (`load`, docs/policies/load.md): those with a load
    source, except endpoints of peer sites (their site reads their load)."""
    peers = {p.name for p in config.peers.sites} if config.peers is not None else set()
    here = config.site.name
    return [
        ep
        for svc in config.services
        for ep in svc.endpoints
        if ep.load is not None and (ep.site == here or ep.site not in peers)
    ]


def check_units(endpoint: Endpoint) -> tuple[Endpoint, ...]:
    """The probed units of an endpoint with `checks`: the endpoint with one of its checks each (keyed
    `(service, "<address>#<check>")`); () for any other endpoint."""
    several = endpoint.checks
    if several is None or endpoint.check is not None:
        return ()
    return tuple(replace(endpoint, check=check) for check in several.checks)


def _votable(check: Check) -> bool:
    """Whether this site can vote on another site's endpoint with `check`: any check it runs itself
    (a push check is fed at the owner's API only: a peer would see every push missing)."""
    return check.type is not CheckType.PUSH


def unchanged_keys(
    before: Mapping[EndpointKey, Endpoint], after: Mapping[EndpointKey, Endpoint]
) -> set[EndpointKey]:
    """Endpoints probed under both configs (`probed_endpoints` of each) with the same check at the
    same probed address: their health is carried over (and their probe loops keep running)."""
    kept = {key for key, ep in after.items() if (was := before.get(key)) is not None and _same(was, ep)}
    # An endpoint with several checks keeps its combined verdict while one of its checks is kept (it
    # is combined again from its checks after the reload).
    kept.update([after[key].endpoint_key for key in kept if after[key].unit])
    return kept


def _same(a: Endpoint, b: Endpoint) -> bool:
    return a.check == b.check and a.probe_address == b.probe_address


def endpoint_key(config: Config, service: str, address: str) -> EndpointKey:
    """The key of a configured endpoint named by service and address, normalized ("App.x" ->
    "app.x.", "2001:DB8::0001" -> "2001:db8::1"). KeyError when there is no such endpoint."""
    name = service.strip().lower()
    name = name if name.endswith(".") else name + "."
    wanted = normal_address(address)
    for svc in config.services:
        if svc.name == name:
            for ep in svc.endpoints:
                if ep.address == wanted:
                    return ep.key
            raise KeyError(f"service {name} has no endpoint {address}")
    raise KeyError(f"no service {name}")


def normal_address(address: str) -> str:
    text = address.strip()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        text = text.lower()
        return text if text.endswith(".") else text + "."


def target_key(endpoint: Endpoint) -> TargetKey:
    """The probe an endpoint needs. Exec checks see the service name and push checks are fed per
    endpoint, so neither is shared across services."""
    check = endpoint.check
    assert check is not None
    owner = endpoint.service if check.type in (CheckType.EXEC, CheckType.PUSH) else ""
    if endpoint.unit:  # one check of several: its verdict is combined with the others', never shared
        owner = "|".join(endpoint.key)
    return (probe_host(endpoint), answered_host(endpoint), owner, replace(check, name=""))


def probe_targets(probed: Iterable[Endpoint]) -> dict[EndpointKey, tuple[EndpointKey, ...]]:
    """One probe per distinct target: the first endpoint (in config order) of every group of probed
    endpoints with the same target -> the keys of the whole group (itself first). Every endpoint of a
    group gets the verdict of that one probe."""
    groups: dict[TargetKey, list[EndpointKey]] = {}
    for ep in probed:
        groups.setdefault(target_key(ep), []).append(ep.key)
    return {keys[0]: tuple(keys) for keys in groups.values()}


def vote_owners(config: Config, probed: Iterable[Endpoint]) -> dict[EndpointKey, str]:
    """With `peers.quorum`: the owner site of every probed endpoint (a peer site's endpoint is that
    site's; any other is this site's own)."""
    peers = {p.name for p in config.peers.sites} if config.peers is not None else set()
    own = config.site.name
    return {ep.key: (ep.site if ep.site in peers and ep.site is not None else own) for ep in probed}
