"""From the marked YAML tree to a `Config`: every section, then the checks across sections."""

from __future__ import annotations

from gslbd.config.audit import read_audit
from gslbd.config.checks import CheckRef, read_profiles
from gslbd.config.cuts import Redirects, check_cuts, service_problem
from gslbd.config.discovery import with_discovered
from gslbd.config.fields import Invalid, MapReader, Report, as_map, describe, integer, join
from gslbd.config.loader import Map, Node
from gslbd.config.locality import check_locality_names
from gslbd.config.logs import read_log
from gslbd.config.names import in_zone
from gslbd.config.network import (
    quorum_too_large,
    read_api,
    read_cluster,
    read_dns,
    read_peers,
    read_site,
    read_sites,
    read_state,
    read_topology,
)
from gslbd.config.run_as import read_run_as
from gslbd.config.safety import read_safety
from gslbd.config.service_context import ServiceContext
from gslbd.config.service_file import ServicesFile, read_services_file
from gslbd.config.services import locality_lookup, located_item, read_services
from gslbd.config.yaml_fast import FastServices
from gslbd.config.zones import ZoneInfo, read_zones
from gslbd.errors import Problem
from gslbd.model.config import Config, PeersConfig, SiteConfig
from gslbd.model.exchange_cut import with_exchange_cuts
from gslbd.model.service import Service
from gslbd.model.topology import Locality, SiteInfo, Topology
from gslbd.types import Discover

SUPPORTED_VERSION = 1
TOP_KEYS = (
    "version",
    "site",
    "dns",
    "api",
    "zones",
    "checks",
    "services",
    "services_file",
    "topology",
    "sites",
    "cluster",
    "peers",
    "state",
    "log",
    "run_as",
    "audit",
    "safety",
)


def _version(node: Node) -> int:
    value = integer()(node)
    if value != SUPPORTED_VERSION:
        raise Invalid(f"unsupported version {value}; this gslbd reads version {SUPPORTED_VERSION}")
    return value


def _records_in_subzones(rep: Report, zones: list[ZoneInfo]) -> None:
    """A record written in a zone but inside a more specific served zone would never be answered."""
    for info in zones:
        for name, places in info.owners.items():
            for other in zones:
                inner = other.zone.origin
                deeper = len(inner) > len(info.zone.origin) and in_zone(inner, info.zone.origin)
                if deeper and in_zone(name, inner):
                    rep.error(
                        places[0].line,
                        places[0].record,
                        f"{name!r} belongs to the more specific zone {inner!r}",
                    )
                    break


def _services_below_cuts(
    rep: Report,
    r: MapReader,
    inline: list[Service],
    from_file: ServicesFile | None,
    redirected: dict[str, Redirects],
    fast: FastServices | None,
) -> None:
    """A service at or below a zone cut, or below a DNAME, is never answered (config/cuts.py). The
    inline services' lines are their items' (read with marks, or by the fast YAML reader)."""
    if fast is not None:
        located = [(line, f"services[{k}]") for k, line in enumerate(fast.lines)]
    else:
        located = [(item.line, path) for item, path in r.items("services")]
    for service, (line, path) in zip(inline, located if len(located) == len(inline) else (), strict=False):
        why = service_problem(service, redirected)
        if why is not None:
            rep.error(line, join(path, "name"), why)
    if from_file is not None:
        for service, line in zip(from_file.services, from_file.lines, strict=True):
            why = service_problem(service, redirected)
            if why is not None:
                rep.problems.append(Problem(from_file.source, line, "name", why))


def _conflict(a: Locality, b: Locality) -> bool:
    """Do two localities disagree (a part set in both but different)?"""
    return bool(a.region and b.region and a.region != b.region) or bool(
        a.zone and b.zone and a.zone != b.zone
    )


def _site_localities(
    site: SiteConfig, site_locality_given: bool, sites: dict[str, tuple[SiteInfo, bool]], r: MapReader
) -> dict[str, Locality]:
    localities = {name: info.locality for name, (info, _) in sites.items()}
    own = sites.get(site.name)
    if site_locality_given:
        if own is not None and own[1] and _conflict(own[0].locality, site.locality):
            s = r.sub("sites")
            if s is not None:
                s.rep.warn(
                    s.line_of(site.name),
                    s.at(site.name) + ".locality",
                    f"differs from site.locality, which wins for this site ('{site.name}')",
                )
        localities[site.name] = site.locality
    return localities


def _all_sites(
    site: SiteConfig,
    sites: dict[str, tuple[SiteInfo, bool]],
    used: dict[str, None],
    peers: PeersConfig | None,
    topology: Topology,
) -> tuple[SiteInfo, ...]:
    out: dict[str, SiteInfo] = {}
    own = sites.get(site.name)
    out[site.name] = SiteInfo(site.name, site.locality, own[0].coordinates if own is not None else None)
    for name, (info, _) in sites.items():
        out.setdefault(name, info)
    extra: list[str | None] = list(used)
    extra += [p.name for p in peers.sites] if peers is not None else []
    extra += [n.site for n in topology.networks]
    for extra_name in extra:
        if extra_name is not None:
            out.setdefault(extra_name, SiteInfo(extra_name))
    return tuple(out.values())


def _discover_warning(rep: Report, r: MapReader, peers: PeersConfig | None, zones: list[ZoneInfo]) -> None:
    if peers is None or peers.discover is not Discover.NS:
        return
    names = [ns.name for z in zones for ns in z.zone.nameservers]
    if not any(n.startswith("gslb-ns-") for n in names):
        p = r.sub("peers")
        if p is not None:
            p.warn("discover", "discover: ns, but no zone has a nameserver named gslb-ns-<site>-...")


def _discover(
    r: MapReader, peers: PeersConfig | None, zones: list[ZoneInfo], this_site: str
) -> PeersConfig | None:
    """With `discover: ns`, the peer sites found in the zones' NS names (config/discovery.py)."""
    if peers is None:
        return None
    found, warnings = with_discovered(peers, [z.zone for z in zones], this_site)
    p = r.sub("peers")
    for warning in warnings:
        if p is not None:
            p.warn("discover", warning)
    q = p.sub("quorum") if p is not None else None
    votes, sites = found.quorum, len(found.sites) + 1
    if q is not None and votes is not None and found.discover is Discover.NS and votes > sites:
        q.error("votes", quorum_too_large(votes, sites))
    return found


def build_config(
    rep: Report, tree: Node | None, context: str = "", fast: FastServices | None = None
) -> Config | None:
    """Validate a whole configuration; None when there are errors (all of them are in `rep`).
    `context` identifies the configuration text: a services file's lines validated under the same
    text are not validated again (config/service_file.py). `fast`: the items of `services:` read
    without marks (config/yaml_fast.py), when they were."""
    if tree is None:
        tree = Map(1, ())
    if not isinstance(tree, Map):
        rep.error(tree.line, "", f"the configuration must be a mapping of sections, got {describe(tree)}")
        return None
    r = MapReader(rep, tree, "", 1)
    r.check_keys(TOP_KEYS)
    version = r.get("version", _version, SUPPORTED_VERSION)
    site, site_locality_given = read_site(r.sub("site"))
    sites = read_sites(r.sub("sites"))
    localities = _site_localities(site, site_locality_given, sites, r)
    site = SiteConfig(site.name, localities.get(site.name, Locality()))
    dns = read_dns(r.sub("dns"))
    api = read_api(r.sub("api"))
    peers = read_peers(r.sub("peers"), site.name)
    topology = read_topology(r.sub("topology"))
    zones = read_zones(rep, r)
    _records_in_subzones(rep, zones)
    redirected = check_cuts(rep, zones)
    if not zones and not r.has("zones"):
        rep.warn(1, "zones", "no zones: every query will be answered REFUSED")
    _discover_warning(rep, r, peers, zones)
    peers = _discover(r, peers, zones, site.name)
    checks_r = r.sub("checks")
    profiles = read_profiles(rep, checks_r)
    refs = CheckRef(rep, profiles, set(checks_r.keys()) - {"none"} if checks_r is not None else set())
    ctx = ServiceContext(
        rep=rep,
        zones=zones,
        checks=refs,
        this_site=site.name,
        site_locality=locality_lookup(localities),
        peer_sites={p.name for p in peers.sites} if peers is not None else set(),
        can_locate=bool(topology.networks) or topology.geoip_database is not None,
        has_asn=topology.asn_database is not None,
    )
    inline = read_services(ctx, r, fast)
    from_file = read_services_file(ctx, r, context, (s.name for s in inline))
    services = inline + from_file.services if from_file is not None else inline
    if redirected:
        _services_below_cuts(rep, r, inline, from_file, redirected, fast)
    if not rep.failed:
        # Every service with locality names, with where to report a clash (its line in the file).
        # (a reader only for those: making one per service costs at 100,000 services)
        if fast is not None:  # no error: item k made inline[k]
            named = [(s, located_item(rep, fast, k)) for k, s in enumerate(inline) if s.locality_names]
        else:
            named = [
                (s, as_map(rep, item, path))
                for s, (item, path) in zip(inline, r.items("services"), strict=False)
                if s.locality_names
            ]
        if from_file is not None:
            file_rep = Report(from_file.source, rep.base_dir)
            named += [
                (s, MapReader(file_rep, Map(n, ()), "", n))
                for s, n in zip(from_file.services, from_file.lines, strict=True)
                if s.locality_names
            ]
        check_locality_names(named, services, zones, localities)
        if from_file is not None:
            rep.problems.extend(file_rep.problems)
    refs.warn_unused(checks_r)
    cluster = read_cluster(r.sub("cluster"))
    state = read_state(r.sub("state"))
    log = read_log(r.sub("log"))
    run_as = read_run_as(r.sub("run_as"))
    audit = read_audit(r.sub("audit"))
    safety = read_safety(r, [s.name for s in services])
    if rep.failed:
        return None
    config = Config(
        version=version,
        site=site,
        dns=dns,
        api=api,
        zones=tuple(z.zone for z in zones),
        checks=tuple(check for check, _ in profiles.values()),
        services=tuple(services),
        topology=topology,
        sites=_all_sites(site, sites, ctx.sites_used, peers, topology),
        cluster=cluster,
        peers=peers,
        state=state,
        log=log,
        run_as=run_as,
        audit=audit,
        safety=safety,
        source=rep.source,
    )
    return with_exchange_cuts(config)  # the exchange zone, an insecure child of each signed zone
