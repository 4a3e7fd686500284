"""The text `gslbd explain` prints: why a client gets the answer it gets.

Pure: it reads a built `View` (config + snapshot + plans) and the policy environment, and returns
text. The answer shown is the real one (`View.resolve`) rendered with a seeded rng and seq=0; when
the answer varies per query or per client the possible answers are listed too.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Iterable

from gslbd.answer import SERVICE_TYPES, Dynamic, Negative, Outcome, Records, Rr, View, family_candidates
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, EndpointKey, Rule, Service, unit_key
from gslbd.policy.base import Client, FixedPlan, Location, Plan, PolicyEnv
from gslbd.policy.load import ShedPlan, variant_shares
from gslbd.policy.random_order import ShufflePlan
from gslbd.policy.scope import echoed
from gslbd.policy.weighted import WeightedPlan
from gslbd.state.snapshot import Snapshot, effective_up
from gslbd.types import AdminState, PolicyName, Rcode, Select

RCODE_NAMES = {
    Rcode.NOERROR: "NOERROR",
    Rcode.FORMERR: "FORMERR",
    Rcode.SERVFAIL: "SERVFAIL",
    Rcode.NXDOMAIN: "NXDOMAIN",
    Rcode.NOTIMP: "NOTIMP",
    Rcode.REFUSED: "REFUSED",
}
# At most this many possible answers are listed.
MAX_VARIANTS_SHOWN = 24


def normalize_name(qname: str) -> str:
    name = qname.strip().lower()
    return name if name.endswith(".") else name + "."


def rr_text(rr: Rr) -> str:
    return f"{rr.name} {rr.ttl} IN {rr.rtype} {rr.rdata}"


def locality_text(site: str | None, region: str | None, zone: str | None) -> str:
    parts = [
        f"site {site}" if site else "",
        f"region {region}" if region else "",
        f"zone {zone}" if zone else "",
    ]
    return ", ".join(p for p in parts if p) or "nowhere known"


def location_text(loc: Location, geoip: bool) -> str:
    where = locality_text(loc.site, loc.locality.region, loc.locality.zone)
    if loc.coordinates is not None:
        where += f", coordinates {loc.coordinates[0]:g},{loc.coordinates[1]:g}"
    if loc.how == "unknown":
        geo = "the GeoIP database has no record" if geoip else "no GeoIP database is configured"
        return f"unknown (no topology network matches and {geo})"
    return f"{loc.how} -> {where}"


# The verdict of one check of an endpoint with several (None: no result yet), from the health book.
CheckHealth = Callable[[EndpointKey], bool | None]


def health_text(endpoint: Endpoint, snapshot: Snapshot, peer: bool, checks: CheckHealth | None = None) -> str:
    if peer:
        return f"up (published by site {endpoint.site})"
    verdict = snapshot.health.get(endpoint.key)
    text = "up (no verdict yet)" if verdict is None else "up" if verdict else "down"
    several = endpoint.checks
    if several is None:
        return text
    parts = []
    for name in several.names:
        found = checks(unit_key(endpoint.key, name)) if checks is not None else None
        parts.append(f"{name} {'down' if found is False else 'up' if found else 'up (no result yet)'}")
    return f"{text} (health {several.health}: {', '.join(parts)})"


def endpoint_lines(
    service: Service, rtype: str, snapshot: Snapshot, checks: CheckHealth | None = None
) -> list[str]:
    """One line per endpoint that can answer `rtype`, local then peer, with its state."""
    local = family_candidates(service.endpoints, rtype)
    peers = family_candidates(snapshot.peer_endpoints.get(service.name, ()), rtype)
    if not local and not peers:
        return [f"endpoints ({rtype}): none"]
    lines = [f"endpoints ({rtype}):"]
    width = max(len(e.address) for e in local + peers)
    for endpoint, peer in [(e, False) for e in local] + [(e, True) for e in peers]:
        loc = endpoint.locality
        admin = snapshot.admin_state(endpoint)
        verdict = "candidate" if effective_up(endpoint, snapshot) else "not a candidate"
        if admin is AdminState.DOWN:
            verdict += " (forced down by an admin)"
        elif admin is AdminState.UP:
            verdict += " (forced up by an admin)"
        lines.append(
            f"  {endpoint.address:<{width}}  {locality_text(endpoint.site, loc.region, loc.zone)}"
            f"  weight {endpoint.weight}  priority {endpoint.priority}  admin {admin.value}"
            f"  health {health_text(endpoint, snapshot, peer, checks)}  -> {verdict}"
        )
    return lines


def service_lines(service: Service) -> list[str]:
    lines = [
        f"service: {service.name} policy {service.policy.value}, ttl {service.ttl}, "
        f"max_answers {service.max_answers}, all_down {service.all_down.value}"
    ]
    if service.policy is PolicyName.FAILOVER:
        lines.append(f"  failover_order: {', '.join(service.failover_order) or '(empty)'}")
    if service.policy is PolicyName.WEIGHTED:
        weights = ", ".join(f"{s} {w}" for s, w in service.weights) if service.weights else None
        lines.append(f"  weights: {weights or 'none, per-endpoint weight'}")
    if service.policy is PolicyName.GEO and service.bias:
        lines.append(
            f"  bias: {', '.join(f'{s} {b:+d}' for s, b in service.bias)} (distance x (1 - bias/100))"
        )
    if service.select is Select.FIRST_N:
        lines.append(f"  select: first_n (the first {service.max_answers} of the policy's order)")
    for pool in service.pools:
        held = ", ".join([*(f"site {x}" for x in pool.sites), *pool.addresses])
        then = f", fallback {pool.fallback}" if pool.fallback else ""
        lines.append(f"  pool {pool.name}: {held}; min_healthy {pool.min_healthy}{then}")
    for i, rule in enumerate(service.rules, 1):
        lines.append(f"  rule {i}: {rule_text(rule)} -> pool {rule.pool}")
    if service.fallback:
        lines.append(f"  fallback: {', '.join(service.fallback)}")
    if service.ttl_range is not None:
        lines.append(
            f"  ttl: health-driven, {service.ttl} now (the least time until the answer could change, "
            f"between min {service.ttl_range.min} and max {service.ttl_range.max})"
        )
    if service.failover_delay or service.failback_delay:
        over, back = service.failover_delay, service.failback_delay
        lines.append(f"  delays: failover_delay {over:g}s, failback_delay {back:g}s")
    if service.min_healthy is not None:
        what = (
            "up endpoints of the family" if service.min_healthy.count else "of its endpoints of the family up"
        )
        lines.append(f"  min_healthy: {service.min_healthy.text} (a site with fewer {what} counts as failed)")
    return lines


def rule_text(rule: Rule) -> str:
    """A rule's conditions as written (`any client` for the catch-all)."""
    parts = [
        f"{what} {', '.join(map(str, values))}"
        for what, values in (
            ("networks", rule.networks),
            ("sites", rule.sites),
            ("countries", rule.countries),
            ("continents", rule.continents),
            ("asn", rule.asns),
        )
        if values
    ]
    return " and ".join(parts) or "any client"


def variant_text(variant: Iterable[Endpoint]) -> str:
    return ", ".join(e.address for e in variant)


def variation_lines(plan: Plan) -> list[str]:
    """How the answer varies, and every possible answer with its share when that is known."""
    variants = plan.variants
    if len(variants) == 1:
        return ["the answer is the same for every query"]
    shares: tuple[float, ...] | None
    equal = tuple(1 / len(variants) for _ in variants)
    if isinstance(plan, ShedPlan):  # shed_load (policy/load.py): a draw, then the policy's own plan
        head = f"varies per query, shed_load draws first, {len(variants)} possible answers:"
        shares = variant_shares(plan)
    elif isinstance(plan, WeightedPlan):
        head, shares = f"varies per query, drawn by weight from {len(variants)} answers:", plan.shares()
    elif isinstance(plan, ShufflePlan):
        head, shares = f"varies per query, drawn uniformly from {len(variants)} answers:", equal
    elif plan.location_dependent:
        head, shares = f"depends on the client, {len(variants)} possible answers:", None
    else:
        head, shares = f"varies per query, the query counter rotates through {len(variants)} answers:", equal
    lines = [f"the answer {head}"]
    for i, variant in enumerate(variants[:MAX_VARIANTS_SHOWN]):
        share = f"{shares[i]:6.1%}  " if shares is not None else "  "
        lines.append(f"  {share}{variant_text(variant)}")
    if len(variants) > MAX_VARIANTS_SHOWN:
        lines.append(f"  ... and {len(variants) - MAX_VARIANTS_SHOWN} more")
    return lines


def decision_lines(outcome: Outcome, service: Service | None, rtype: str, client: Client) -> list[str]:
    if isinstance(outcome, Negative):
        return [f"decision: {outcome.reason}"]
    if isinstance(outcome, Records):
        if service is not None and rtype in SERVICE_TYPES:
            return [f"decision: no healthy {rtype} candidates; all_down=fallback answers the fallback"]
        return ["decision: records of the zone, served as they are"]
    lines = [f"decision: {outcome.reason}" if outcome.reason else "decision:"]
    if isinstance(outcome, Dynamic):
        lines.extend(f"  {line}" for line in outcome.plan.explain(client.ip, client.v6))
    return lines


def client_lines(config: Config, client_ip: str, ecs: str | None) -> tuple[Client, list[str], int | None]:
    """The address the client is located by, how it was chosen, and the ECS source prefix length."""
    if ecs is None:
        return Client.parse(client_ip), [f"client: {client_ip} (packet source, no ECS)"], None
    net = ipaddress.ip_network(ecs, strict=False)
    if not config.topology.use_client_subnet:
        lines = [f"client: {client_ip} (packet source; ECS {net} ignored: use_client_subnet is off)"]
        return Client.parse(client_ip), lines, None
    client = Client(int(net.network_address), net.version == 6)
    lines = [f"client: {net} from EDNS Client Subnet (source {client_ip})"]
    return client, lines, net.prefixlen


def answer_lines(view: View, qname: str, rtype: str, client: Client) -> tuple[list[str], int | None]:
    """The answer's lines, and the ECS scope it depends on (policy/scope.py; None: independent)."""
    answer = view.resolve(qname, rtype, client.ip, client.v6, random.Random(0), 0)
    rcode = RCODE_NAMES.get(answer.rcode, str(answer.rcode))
    if answer.rcode == Rcode.NOERROR and not answer.answer:
        rcode = "NOERROR (referral)" if answer.referral is not None else "NOERROR (NODATA)"
    lines = [f"answer: {rcode}{', authoritative' if answer.authoritative else ''}"]
    sections = (("answer", answer.answer), ("authority", answer.authority), ("additional", answer.additional))
    for section, rrs in sections:
        lines.extend(f"  {section}: {rr_text(rr)}" for rr in rrs)
    return lines, answer.ecs_scope if answer.location_dependent else None


def explain(
    config: Config,
    view: View,
    env: PolicyEnv,
    qname: str,
    rtype: str,
    client_ip: str,
    ecs: str | None = None,
    checks: CheckHealth | None = None,
) -> str:
    """Why `client_ip` (or the ECS address) gets the answer it gets for `qname`/`rtype`; `checks`
    gives the verdict of each check of an endpoint with several (a running instance's book)."""
    name = normalize_name(qname)
    rtype = rtype.upper()
    client, lines, ecs_prefix = client_lines(config, client_ip, ecs)
    lines.insert(0, f"question: {name} {rtype}")
    data = view.get(name)
    zone = data.zone if data is not None else view.find_zone(name)
    if zone is None:
        lines.append("zone: none served contains this name -> REFUSED")
        lines.extend(answer_lines(view, name, rtype, client)[0])
        return "\n".join(lines) + "\n"
    lines.append(f"zone: {zone.origin}")
    encloser = view.encloser(name, zone.origin) if data is None else data
    if encloser is not None and encloser.referral is not None:
        lines.append(
            f"name: at or below the zone cut {encloser.referral.cut} -> referral (not authoritative)"
        )
        lines.extend(answer_lines(view, name, rtype, client)[0])
        return "\n".join(lines) + "\n"
    if data is None and encloser is not None and "DNAME" in encloser.outcomes:
        lines.append(f"name: does not exist; below the DNAME at {encloser.name} (RFC 6672)")
        lines.extend(answer_lines(view, name, rtype, client)[0])
        return "\n".join(lines) + "\n"
    if data is None and (wild := view.wildcard(name, zone.origin)) is not None:
        lines.append(f"name: does not exist; the wildcard {wild.name} answers it (RFC 4592)")
        data = wild
    if data is None:
        lines.append("name: does not exist in the zone -> NXDOMAIN")
        lines.extend(answer_lines(view, name, rtype, client)[0])
        return "\n".join(lines) + "\n"
    service = data.service
    if service is not None:
        lines.extend(service_lines(service))
        if rtype in SERVICE_TYPES:
            lines.extend(endpoint_lines(service, rtype, view.snapshot, checks))
    elif not data.outcomes:
        lines.append("name: exists only because names below it exist (empty non-terminal)")
    else:
        lines.append(f"name: holds {', '.join(sorted(data.outcomes))}")
    if service is not None:
        geoip = config.topology.geoip_database is not None
        lines.append("location: " + location_text(env.locator.locate(client.ip, client.v6), geoip))
    outcome = data.outcome(rtype)
    lines.extend(decision_lines(outcome, service, rtype, client))
    if isinstance(outcome, Dynamic) and not isinstance(outcome.plan, FixedPlan):
        lines.extend(variation_lines(outcome.plan))
    answers, used = answer_lines(view, name, rtype, client)
    lines.extend(answers)
    if ecs_prefix is not None:
        scope = echoed(used, ecs_prefix) if used is not None else 0
        dependent = used is not None
        lines.append(f"ECS scope: /{scope} ({'depends on' if dependent else 'independent of'} the location)")
    return "\n".join(lines) + "\n"
