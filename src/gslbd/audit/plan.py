"""What the audit asks: every service (or a seeded sample), each of its record types, once without EDNS
Client Subnet and once with each topology network; and how often (policies that answer by chance are
asked several times, so a site is judged by the set of addresses it gives, not by one answer). Pure."""

from __future__ import annotations

import random
from dataclasses import dataclass

from gslbd.model.config import Config
from gslbd.model.service import Service
from gslbd.types import EndpointKind, PolicyName

# Policies whose answer to one client is the same every time (given the same health): asked once.
DETERMINISTIC = frozenset({PolicyName.FAILOVER, PolicyName.GEO, PolicyName.HASH})
WILDCARD_LABEL = "audit-probe"  # the name asked for a wildcard service `*.apps.<zone>`


@dataclass(frozen=True, slots=True)
class Question:
    """One question asked of every site: `network` is the ECS subnet sent ("10.1.0.0/16"), None = none."""

    service: str
    name: str
    rtype: str
    network: str | None
    tries: int = 1


def chosen(services: tuple[Service, ...], sample: int, rng: random.Random) -> list[Service]:
    """Every service when `sample` is 0 or not smaller than their number, else `sample` of them drawn
    by `rng`; in config order either way."""
    if sample <= 0 or sample >= len(services):
        return list(services)
    picked = set(rng.sample(range(len(services)), sample))
    return [s for k, s in enumerate(services) if k in picked]


def record_types(service: Service) -> tuple[str, ...]:
    """A for IPv4 and hostname endpoints (a CNAME answers A), AAAA for IPv6 ones; A for none at all."""
    kinds = {e.kind for e in service.endpoints}
    types = []
    if not kinds or kinds & {EndpointKind.IPV4, EndpointKind.HOSTNAME}:
        types.append("A")
    if EndpointKind.IPV6 in kinds:
        types.append("AAAA")
    return tuple(types)


def questions(config: Config, sample: int, rng: random.Random, tries: int = 3) -> list[Question]:
    """The questions of one audit run. `tries`: how often a policy that answers by chance is asked."""
    networks: list[str | None] = [None]
    if config.topology.use_client_subnet:
        networks += sorted({str(n.cidr) for n in config.topology.networks})
    out: list[Question] = []
    for service in chosen(config.services, sample, rng):
        name = WILDCARD_LABEL + service.name[1:] if service.wildcard else service.name
        times = 1 if service.policy in DETERMINISTIC else max(1, tries)
        for rtype in record_types(service):
            out += [Question(service.name, name, rtype, network, times) for network in networks]
    return out
