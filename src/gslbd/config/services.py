"""Services (`services:`) and their endpoints."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace

from gslbd.config.fast import fast_service, plain_map
from gslbd.config.fields import (
    Invalid,
    MapReader,
    Report,
    as_map,
    boolean,
    enum,
    integer,
    join,
    scalar,
    site_name,
    string,
)
from gslbd.config.load import check_feedback, read_load, read_shed_load, read_weight_from
from gslbd.config.loader import Map, Node, Scalar, Seq
from gslbd.config.min_healthy import min_healthy_value, min_healthy_warning
from gslbd.config.names import in_zone, ip_address, make_name, origin_name, relative_to, target
from gslbd.config.network import opt_locality
from gslbd.config.pools import read_pools
from gslbd.config.service_context import ServiceContext, name_problem, served_zones, zone_of
from gslbd.config.service_keys import ENDPOINT_KEYS, SERVICE_KEYS
from gslbd.config.tags import tag_value
from gslbd.config.timing import read_delays, read_ttl
from gslbd.config.yaml_fast import FastServices, Known
from gslbd.config.zones import ZoneInfo
from gslbd.model.check import Check, CheckSet
from gslbd.model.load import LoadSource
from gslbd.model.service import Endpoint, HttpsRecord, MinHealthy, Service, SrvRecord
from gslbd.model.topology import Locality
from gslbd.types import AdminState, AllDown, EndpointKind, HealthMode, PolicyName, Select


def _zone_for(ctx: ServiceContext, r: MapReader) -> tuple[ZoneInfo | None, str | None]:
    """The zone holding the service and its absolute name; problems are reported."""
    text = r.req("name", string)
    explicit = r.opt("zone", origin_name)
    if r.has("zone") and explicit is None:
        return None, None
    served = served_zones(ctx)
    if explicit is not None and explicit not in served:
        known = ", ".join(sorted(served)) or "none"
        r.error("zone", f"{explicit!r} is not a served zone; served zones: {known}")
        return None, None
    if text is None:
        return None, None
    absolute = text.strip().endswith(".") or text.strip() == "@"
    if explicit is None and not absolute:
        if len(ctx.zones) != 1:
            why = "no zones are defined" if not ctx.zones else "there are several zones"
            r.error("name", f"relative name {text!r} needs a zone: {why}; write it absolute or set zone")
            return None, None
        explicit = ctx.zones[0].zone.origin
    try:
        name = make_name(text, explicit, wildcard=True)
    except Invalid as exc:
        r.error("name", exc.message)
        return None, None
    if explicit is not None:
        found = served[explicit] if in_zone(name, explicit) else None
    else:
        found = zone_of(served, name)
    if found is None:
        where = f"the zone {explicit!r}" if explicit is not None else "any served zone"
        r.error("name", f"{name!r} is not inside {where}")
        return None, None
    return found, name


def _check_name(r: MapReader, info: ZoneInfo, name: str) -> bool:
    why = name_problem(info, name)
    if why is not None:
        r.error("name", why)
        return False
    return True


def _fallback(r: MapReader, all_down: AllDown) -> tuple[str, ...]:
    found = r.list_of("fallback", target) or []
    hosts = [(a, p, line) for (a, kind), p, line in found if kind is EndpointKind.HOSTNAME]
    if hosts and len(found) > 1:
        r.error("fallback", "give either IP addresses or exactly one hostname")
    node = r.node_of("fallback")
    if all_down is AllDown.FALLBACK and node is None:
        r.rep.error(r.line, r.at("fallback"), "required when all_down is fallback")
    elif all_down is AllDown.FALLBACK and isinstance(node, Seq) and not node.items:
        r.error("fallback", "must not be empty when all_down is fallback")
    if found and all_down is not AllDown.FALLBACK:
        r.warn("fallback", f"fallback is only used with all_down: fallback (all_down is {all_down})")
    return tuple(dict.fromkeys(a for (a, _), _, _ in found))


def _per_site(r: MapReader, key: str, value: Callable[[Node], int]) -> tuple[tuple[str, int], ...] | None:
    """A mapping of site name -> integer (`weights`, `bias`), in config order; None when not given."""
    w = r.sub(key)
    if w is None:
        return None
    out = []
    for entry in w.node.entries:
        path = join(w.path, entry.key)
        try:
            site_name(Scalar(entry.key_line, entry.key))
            out.append((entry.key, value(entry.value)))
        except Invalid as exc:
            w.rep.error(entry.value.line, path, exc.message)
    return tuple(out)


def _weights(r: MapReader) -> tuple[tuple[str, int], ...] | None:
    out = _per_site(r, "weights", integer(0, 1000))
    if out and not any(v for _, v in out):
        r.warn("weights", "every weight is 0: the sites are picked as if equal")
    return out


def read_endpoint(
    ctx: ServiceContext,
    r: MapReader,
    service: str,
    default_check: Check | None,
    health: HealthMode = HealthMode.ALL,
    default_load: LoadSource | None = None,
) -> Endpoint | None:
    r.check_keys(ENDPOINT_KEYS)
    found = r.req("address", target)
    site = r.get("site", site_name, ctx.this_site)
    ctx.sites_used.setdefault(site)
    locality = opt_locality(r)
    weight = r.get("weight", integer(0, 1000), 1)
    priority = r.get("priority", integer(0), 0)
    inline = f"{service}#{found[0]}" if found is not None else f"{service}#endpoint"
    given, check = ctx.checks.resolve(r, inline)
    several = _check_set(ctx, r, health)
    probe = r.opt("probe_address", ip_address)
    admin = r.get("admin", enum(AdminState, "admin state"), AdminState.OBEY)
    tags = r.list_of("tags", _tag, single=False) or []
    load = read_load(r) if r.has("load") else default_load
    if found is None:
        return None
    return Endpoint(
        service=service,
        address=found[0],
        kind=found[1],
        site=site,
        locality=locality if locality is not None else ctx.site_locality(site),
        weight=weight,
        priority=priority,
        check=None if several is not None or r.has("checks") else check if given else default_check,
        probe_address=probe,
        admin=admin,
        tags=tuple(dict.fromkeys(t for t, _, _ in tags)),
        checks=several,
        load=load,
    )


def _check_set(ctx: ServiceContext, r: MapReader, health: HealthMode) -> CheckSet | None:
    """An endpoint's `checks` (several check profiles) with its `health` (else the service's)."""
    mode = r.get("health", enum(HealthMode, "health mode"), health)
    if not r.has("checks"):
        if r.has("health"):
            r.warn(
                "health", "health combines the endpoint's checks: [a, b]; with one check it changes nothing"
            )
        return None
    if r.has("check"):
        r.error(
            "checks",
            "check and checks cannot both be given: one check is `check: NAME`, several `checks: [a, b]`",
        )
    checks = ctx.checks.resolve_list(r)
    return CheckSet(checks, mode) if checks is not None else None


def _read_endpoints(
    ctx: ServiceContext,
    r: MapReader,
    name: str,
    default: Check | None,
    health: HealthMode,
    load: LoadSource | None,
) -> list[Endpoint]:
    out: list[Endpoint] = []
    seen: dict[str, str] = {}
    for item, path in r.items("endpoints"):
        e = as_map(ctx.rep, item, path)
        if e is None:
            continue
        endpoint = read_endpoint(ctx, e, name, default, health, load)
        if endpoint is None:
            continue
        if endpoint.address in seen:
            e.error(
                "address", f"duplicate endpoint address {endpoint.address} (also {seen[endpoint.address]})"
            )
            continue
        seen[endpoint.address] = path
        out.append(endpoint)
    return out


def _site_warnings(
    ctx: ServiceContext, r: MapReader, service: Service, order: list[tuple[str, str, int]]
) -> None:
    have = {e.site for e in service.endpoints} | ctx.peer_sites
    if service.failover_order and service.policy is not PolicyName.FAILOVER:
        r.warn(
            "failover_order",
            f"failover_order is only used by the failover policy (policy is {service.policy})",
        )
    if service.weights is not None and service.policy is not PolicyName.WEIGHTED:
        r.warn("weights", f"weights are only used by the weighted policy (policy is {service.policy})")
    for site, path, line in order:
        if site not in have:
            r.rep.warn(line, path, f"no endpoint has site '{site}'")
    if service.select is Select.FIRST_N and service.policy in (PolicyName.ROUND_ROBIN, PolicyName.RANDOM):
        r.warn(
            "select",
            f"select: first_n is the same as rotate for policy {service.policy}: its order already holds"
            " every candidate",
        )
    if service.bias and service.policy is not PolicyName.GEO:
        r.warn("bias", f"bias is only used by the geo policy (policy is {service.policy})")
    for key, pairs in (("weights", service.weights or ()), ("bias", service.bias)):
        w = r.node_of(key)
        for site, _ in pairs:
            if site not in have and isinstance(w, Map):
                entry = w.get(site)
                line = entry.key_line if entry is not None else w.line
                r.rep.warn(line, join(r.at(key), site), f"no endpoint has site '{site}'")
    kinds = {e.kind is EndpointKind.HOSTNAME for e in service.endpoints}
    if len(kinds) == 2:
        r.warn(
            "endpoints", "mixes hostname and IP endpoints: a hostname picked first is answered alone (CNAME)"
        )
    if service.locality_names and not any(e.locality.region for e in service.endpoints):
        r.warn("locality_names", "no endpoint has a region, so no locality names are made")
    if service.policy is PolicyName.GEO and not ctx.can_locate:
        r.warn("policy", "geo policy, but topology has no networks and no geoip database to locate clients")
    if service.min_healthy is not None:
        why = min_healthy_warning(service.min_healthy, service.endpoints, ctx.peer_sites)
        if why is not None:
            r.warn("min_healthy", why)
    if not service.endpoints and not ctx.peer_sites:
        r.rep.warn(r.line, r.at("endpoints"), "the service has no endpoints")


def read_service(ctx: ServiceContext, r: MapReader) -> Service | None:
    r.check_keys(SERVICE_KEYS)
    info, name = _zone_for(ctx, r)
    ok = info is not None and name is not None and _check_name(r, info, name)
    policy = r.get("policy", enum(PolicyName, "policy"), PolicyName.ROUND_ROBIN)
    order = r.list_of("failover_order", site_name) or []
    seen: set[str] = set()
    for site, path, line in order:
        if site in seen:
            ctx.rep.error(line, path, f"site '{site}' is listed twice")
        seen.add(site)
        ctx.sites_used.setdefault(site)
    weights = _weights(r)
    for site, _ in weights or ():
        ctx.sites_used.setdefault(site)
    zone_ttl = info.zone.ttl if info is not None else 30
    all_down = r.get("all_down", enum(AllDown, "all_down mode"), AllDown.SERVE_ALL)
    fqdn = name or "<service>"
    _, default_check = ctx.checks.resolve(r, f"{fqdn}#inline")
    fixed_ttl, ttl_range = read_ttl(r, zone_ttl)
    failover_delay, failback_delay = read_delays(r)
    health = r.get("health", enum(HealthMode, "health mode"), HealthMode.ALL)  # for endpoints' checks
    load = read_load(r)  # the endpoints' load source unless they name their own (config/load.py)
    service = Service(
        name=fqdn,
        zone=info.zone.origin if info is not None else "",
        label=relative_to(fqdn, info.zone.origin) if info is not None and name is not None else "",
        policy=policy,
        failover_order=tuple(dict.fromkeys(s for s, _, _ in order)),
        weights=weights,
        ttl=fixed_ttl,
        max_answers=r.get("max_answers", integer(1), 8),
        all_down=all_down,
        fallback=_fallback(r, all_down),
        locality_names=r.get("locality_names", boolean, False),
        endpoints=tuple(_read_endpoints(ctx, r, fqdn, default_check, health, load)),
        https=_https(r.sub("https")),
        srv=_srv(r.sub("srv"), fqdn, info.zone.origin if info is not None else None),
        min_healthy=r.opt("min_healthy", _min_healthy),
        bias=_per_site(r, "bias", integer(-99, 99)) or (),
        select=r.get("select", enum(Select, "select"), Select.ROTATE),
        failover_delay=failover_delay,
        failback_delay=failback_delay,
        ttl_range=ttl_range,
        weight_from=read_weight_from(r),
        shed_load=read_shed_load(r),
    )
    check_feedback(
        r, policy, weights is not None, service.weight_from, service.shed_load, service.endpoints, load
    )
    if r.has("pools") or r.has("rules"):
        pools, rules = read_pools(r, service.endpoints, ctx.peer_sites, ctx.has_asn)
        service = replace(service, pools=pools, rules=rules)
    if service.https is not None and any(e.kind is EndpointKind.HOSTNAME for e in service.endpoints):
        r.error("https", "an HTTPS record needs address endpoints (a hostname endpoint is a CNAME)")
    if service.wildcard and service.locality_names:
        r.error("locality_names", "a wildcard service has no locality names")
    _site_warnings(ctx, r, service, order)
    return service if ok else None


def _tag(node: Node) -> str:
    return tag_value(scalar(node, "a tag (a string)"))


def _min_healthy(node: Node) -> MinHealthy:
    return min_healthy_value(scalar(node, "a share or a count"))


_ALPN = re.compile(r"[\x21-\x7e]{1,255}\Z")


def _alpn_id(node: Node) -> str:
    value = string(node)
    if not _ALPN.match(value) or "," in value or "\\" in value:
        raise Invalid(f"invalid ALPN id {value!r}: printable, no comma or backslash, 1-255 characters")
    return value


def _https(r: MapReader | None) -> HttpsRecord | None:
    """`https: {alpn: [h2, h3], port: 443}`: the HTTPS record at the service name."""
    if r is None:
        return None
    r.check_keys(("alpn", "port"))
    alpn = tuple(dict.fromkeys(a for a, _, _ in r.list_of("alpn", _alpn_id) or []))
    return HttpsRecord(alpn, r.opt("port", integer(1, 65535)))


def _srv(r: MapReader | None, service: str, origin: str | None) -> SrvRecord | None:
    """`srv: {name: _http._tcp, port: 443}`: SRV records at the name (relative to the service name,
    or absolute inside the service's zone)."""
    if r is None:
        return None
    r.check_keys(("name", "port"))
    text = r.req("name", string)
    port = r.req("port", integer(0, 65535))
    if text is None or port is None:
        return None
    try:
        name = make_name(text, service.removeprefix("*.") if not text.strip().endswith(".") else None)
    except Invalid as exc:
        r.error("name", exc.message)
        return None
    if service.startswith("*."):
        r.error("name", "a wildcard service cannot have SRV records")
        return None
    if origin is not None and not in_zone(name, origin):
        r.error("name", f"{name!r} is not inside the service's zone {origin!r}")
        return None
    return SrvRecord(name, port)


def read_services(ctx: ServiceContext, root: MapReader, fast: FastServices | None = None) -> list[Service]:
    """The services of `services:`; `fast`: its items read without marks (config/yaml_fast.py), when
    they were."""
    if fast is not None:
        return _read_fast(ctx, fast)
    out: list[Service] = []
    seen: dict[str, str] = {}
    for item, path in root.items("services"):
        made = fast_service(ctx, plain_map(item)) if isinstance(item, Map) else None
        service = made[0] if made is not None else None
        if service is None:
            r = as_map(ctx.rep, item, path)
            service = read_service(ctx, r) if r is not None else None
        if service is None:
            continue
        if service.name in seen:
            r = as_map(ctx.rep, item, path)
            if r is not None:
                r.error("name", f"duplicate service {service.name!r} (also {seen[service.name]})")
            continue
        seen[service.name] = path
        out.append(service)
    return out


def _read_fast(ctx: ServiceContext, fast: FastServices) -> list[Service]:
    """As read_services, over items read without marks: an item the fast path does not make is read
    again with marks from its own lines and validated the located way. What an item gives without a
    problem is recorded in `fast.known`; an item known already (a reload) is not read again, only its
    effects on the context (the sites and check profiles it names) are repeated, in the same order."""
    out: list[Service] = []
    seen: dict[str, int] = {}
    rep = ctx.rep
    before = fast.known
    known: list[Known | None] = [None] * len(fast.values)
    fast.known = known
    profiles = ctx.checks.profiles
    sites_used = ctx.sites_used
    replayed: set[tuple[str, ...]] = set()
    for k, value in enumerate(fast.values):
        item = before[k] if before is not None else None
        service: Service | None
        if item is not None:
            service, sites, checks = known[k] = item
            if sites not in replayed:
                replayed.add(sites)
                for site in sites:
                    sites_used.setdefault(site)
            if checks:
                ctx.checks.used.update(checks)
        else:
            problems = len(rep.problems)
            found = fast_service(ctx, value) if type(value) is dict else None
            if found is not None:
                service, sites = found
            else:
                r = located_item(rep, fast, k)
                service = read_service(ctx, r) if r is not None else None
                sites = sites_named(service) if service is not None else ()
            if service is None:
                continue
            if len(rep.problems) == problems:
                known[k] = (service, sites, _profiles_named(value, profiles) if profiles else ())
        if service.name in seen:
            r = located_item(rep, fast, k)
            if r is not None:
                r.error("name", f"duplicate service {service.name!r} (also services[{seen[service.name]}])")
            continue
        seen[service.name] = k
        out.append(service)
    return out


def _profiles_named(value: object, profiles: Mapping[str, object]) -> tuple[str, ...]:
    """The check profiles a service's plain value names (its own `check` and its endpoints')."""
    if type(value) is not dict:
        return ()
    endpoints = value.get("endpoints")
    names = [value.get("check")]
    if type(endpoints) is list:
        names += [e.get("check") for e in endpoints if type(e) is dict]
        for e in endpoints:  # `checks: [a, b]`
            several = e.get("checks") if type(e) is dict else None
            if type(several) is list:
                names += several
    return tuple(dict.fromkeys(n for n in names if type(n) is str and n in profiles))


def located_item(rep: Report, fast: FastServices, k: int) -> MapReader | None:
    """A reader of item k of `fast` read again with marks (a problem of the text itself is reported)."""
    node, problems = fast.marked(k)
    rep.problems.extend(problems)
    if node is None and not problems:  # its lines hold nothing but a comment: an empty item
        node = Scalar(fast.lines[k], None)
    return as_map(rep, node, f"services[{k}]") if node is not None else None


def sites_named(service: Service) -> tuple[str, ...]:
    """The sites a service names, in the order its validation meets them (failover_order, weights,
    endpoints): what it adds to the known sites."""
    weights = [site for site, _ in service.weights or ()]
    return tuple(dict.fromkeys([*service.failover_order, *weights, *(e.site for e in service.endpoints)]))


def locality_lookup(localities: Mapping[str, Locality]) -> Callable[[str], Locality]:
    return lambda site: localities.get(site, Locality())
