"""The names a site publishes for its peer sites, and the merged endpoint list its policies run on.

Multi-site exchange (k8gb's idea, DNS is the state channel): every site serves, in every zone,

    localtargets-<label>.<origin>  A / AAAA   this site's own healthy endpoints of service <label>.<origin>;
                                              the name does not exist (NXDOMAIN) when there are none, and
                                              a family without endpoints is NODATA
    heartbeat-<site>.<origin>      TXT        "<Unix seconds>" of this site's last health evaluation
                                              (`Snapshot.evaluated_at`), TTL 0

"Own" means endpoints whose `site` is this site (`site.name`), with health and admin state applied;
hostname endpoints are not published. Peer sites poll these names (gslbd.exchange) and put what they learn
into `Snapshot.peer_endpoints`.

The endpoints a service's policy sees are its configured endpoints except those of peer sites (sites
under `peers`: their health is what that site publishes, so they are never probed here), plus the
endpoints learned from peers. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from gslbd.model.config import Config
from gslbd.model.load import LoadState
from gslbd.model.service import Endpoint, Service
from gslbd.model.zone import Zone
from gslbd.policy.load import FIGURE_DIGITS
from gslbd.state.snapshot import Snapshot, effective_up
from gslbd.types import EndpointKind

LOCALTARGETS_PREFIX = "localtargets-"
VOTES_PREFIX = "votes-"  # the publication's key of a service's votes (peers.quorum): votes-<label>.<origin>
LOADS_PREFIX = "loads-"  # the publication's key of a service's load figures: loads-<label>.<origin>
HEARTBEAT_PREFIX = "heartbeat-"
HEARTBEAT_TTL = 0
_PUBLISHED_KINDS = {EndpointKind.IPV4: "A", EndpointKind.IPV6: "AAAA"}

# (owner name, zone, rtype, ((ttl, rdata), ...)): one RRset, in presentation form.
RRset = tuple[str, Zone, str, tuple[tuple[int, str], ...]]


def localtargets_name(service: Service) -> str:
    """`localtargets-<label>.<origin>` of a service (absolute, lower case)."""
    return f"{LOCALTARGETS_PREFIX}{service.label}.{service.zone}"


def heartbeat_name(site: str, origin: str) -> str:
    """`heartbeat-<site>.<origin>`."""
    return f"{HEARTBEAT_PREFIX}{site}.{origin}"


def heartbeat_rdata(evaluated_at: float) -> str:
    """The heartbeat's TXT data: the whole Unix seconds, quoted."""
    return f'"{int(evaluated_at)}"'


def peer_site_names(config: Config) -> frozenset[str]:
    """The sites whose endpoints are learned over the exchange instead of probed here."""
    if config.peers is None:
        return frozenset()
    return frozenset(p.name for p in config.peers.sites)


def own_up_endpoints(config: Config, service: Service, snapshot: Snapshot) -> tuple[Endpoint, ...]:
    """This site's answerable address endpoints of `service`, in config order: what it publishes."""
    site = config.site.name
    return tuple(
        [
            e
            for e in service.endpoints
            if e.site == site and e.kind in _PUBLISHED_KINDS and effective_up(e, snapshot)
        ]
    )


def votes_name(service: Service) -> str:
    """The publication's key of a service's votes: `votes-<label>.<origin>` (exchange/zone.py serves
    them as TXT at `<label>.votes.<exchange apex>`)."""
    return f"{VOTES_PREFIX}{service.label}.{service.zone}"


def vote_rdata(address: str, up: bool) -> str:
    """One vote as published: `<address>=up` or `<address>=down`."""
    return f"{address}={'up' if up else 'down'}"


def read_vote(text: str) -> tuple[str, bool] | None:
    """(address, up) of one published vote; None when it is not one."""
    address, sep, verdict = text.partition("=")
    if not sep or verdict not in ("up", "down") or not address:
        return None
    return address, verdict == "up"


def service_votes(service: Service, snapshot: Snapshot) -> tuple[str, ...]:
    """This site's raw verdicts on the endpoints of `service` (peers.quorum), sorted; () without."""
    votes = snapshot.votes
    if not votes:
        return ()
    found = {vote_rdata(e.address, v) for e in service.endpoints if (v := votes.get(e.key)) is not None}
    return tuple(sorted(found))


def loads_name(service: Service) -> str:
    """The publication's key of a service's load figures: `loads-<label>.<origin>` (exchange/zone.py
    serves them as TXT at `<label>.load.<exchange apex>`)."""
    return f"{LOADS_PREFIX}{service.label}.{service.zone}"


_OUT = "out"
_FIGURE = re.compile(r"[0-9]{1,6}(\.[0-9]{1,9})?")


def load_rdata(address: str, used: float, out: bool) -> str:
    """One endpoint's load as published: `<address>=<used figure>`, with `,out` while shedding keeps it
    out of the answer (above shed_load.high, with the hysteresis): `192.0.2.10=0.420`,
    `192.0.2.11=0.950,out`."""
    figure = f"{max(0.0, used):.{FIGURE_DIGITS}f}"
    return f"{address}={figure},{_OUT}" if out else f"{address}={figure}"


def read_load(text: str) -> tuple[str, LoadState] | None:
    """(address, the load state a peer answers it with) of one published figure; None when the text
    is not one (a peer counts and ignores it)."""
    address, sep, rest = text.partition("=")
    figure, comma, flag = rest.partition(",")
    if not sep or not address or (comma and flag != _OUT) or _FIGURE.fullmatch(figure) is None:
        return None
    return address, LoadState(used=float(figure), out=bool(comma))


def service_loads(config: Config, service: Service, snapshot: Snapshot) -> tuple[str, ...]:
    """The load figures of this site's own address endpoints of `service` that have one (the used
    figure and whether shedding keeps it out: what every site's answers compute the weights from),
    sorted; () without."""
    loads = snapshot.loads
    if not loads:
        return ()
    site = config.site.name
    found = {
        load_rdata(e.address, s.used, s.out)
        for e in service.endpoints
        if e.site == site
        and e.kind in _PUBLISHED_KINDS
        and (s := loads.get(e.key)) is not None
        and s.used is not None
    }
    return tuple(sorted(found))


def published(config: Config, snapshot: Snapshot) -> dict[str, dict[str, tuple[str, ...]]]:
    """Zone origin -> localtargets name -> the addresses it answers (A and AAAA); names without any
    are left out. With peers.quorum also `votes-<label>.<origin>` -> this site's votes on the
    service's endpoints (`service_votes`), and `loads-<label>.<origin>` -> the load figures of its own
    endpoints (`service_loads`). Comparing two of these tells which zones' publication
    changed (NOTIFY)."""
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for service in config.services:
        addresses = tuple([e.address for e in own_up_endpoints(config, service, snapshot)])
        votes = service_votes(service, snapshot)
        loads = service_loads(config, service, snapshot)
        if addresses or votes or loads:
            zone = out.get(service.zone)
            if zone is None:
                zone = out[service.zone] = {}
            if addresses:
                zone[localtargets_name(service)] = addresses
            if votes:
                zone[votes_name(service)] = votes
            if loads:
                zone[loads_name(service)] = loads
    return out


def republished(
    before: dict[str, dict[str, tuple[str, ...]]],
    config: Config,
    snapshot: Snapshot,
    only: Iterable[Service],
    removed: Iterable[Service] = (),
) -> tuple[dict[str, dict[str, tuple[str, ...]]], list[str]]:
    """`published(config, snapshot)` computed from `before` (the previous result) when only the
    services in `only` may have changed and those in `removed` are gone, and the zones whose
    publication changed (what `changed_zones` would say, without comparing whole zones). `before` is
    left as it was; a zone whose publication did not change keeps its very dict."""
    out = dict(before)
    copied: set[str] = set()

    def zone_of(service: Service) -> dict[str, tuple[str, ...]]:
        if service.zone not in copied:
            out[service.zone] = dict(out.get(service.zone, {}))
            copied.add(service.zone)
        return out[service.zone]

    for service in removed:
        for name in (localtargets_name(service), votes_name(service), loads_name(service)):
            if name in out.get(service.zone, {}):
                del zone_of(service)[name]
    for service in only:
        addresses = tuple(e.address for e in own_up_endpoints(config, service, snapshot))
        for name, data in (
            (localtargets_name(service), addresses),
            (votes_name(service), service_votes(service, snapshot)),
            (loads_name(service), service_loads(config, service, snapshot)),
        ):
            if out.get(service.zone, {}).get(name) == (data or None):
                continue
            if data:
                zone_of(service)[name] = data
            else:
                del zone_of(service)[name]
    for zone in copied:
        if not out[zone]:
            del out[zone]
    return out, sorted(copied)


def changed_zones(
    before: dict[str, dict[str, tuple[str, ...]]], after: dict[str, dict[str, tuple[str, ...]]]
) -> list[str]:
    """The zones whose publication differs between two `published` results (a zone's very same dict
    in both is the same publication, as `republished` keeps it)."""
    return [
        z
        for z in dict.fromkeys([*before, *after])
        if (old := before.get(z)) is not (new := after.get(z)) and old != new
    ]


def exchange_rrsets(config: Config, snapshot: Snapshot) -> Iterator[RRset]:
    """Every RRset of the exchange names: localtargets of each service, the heartbeat of each zone."""
    zones = {z.origin: z for z in config.zones}
    for service in config.services:
        zone = zones.get(service.zone)
        if zone is not None:
            yield from localtargets_rrsets(config, service, zone, snapshot)
    yield from heartbeat_rrsets(config, snapshot)


def localtargets_rrsets(config: Config, service: Service, zone: Zone, snapshot: Snapshot) -> Iterator[RRset]:
    """The A and AAAA RRsets of one service's localtargets name (none when it has no endpoint up here)."""
    by_type: dict[str, list[tuple[int, str]]] = {}
    for e in own_up_endpoints(config, service, snapshot):
        by_type.setdefault(_PUBLISHED_KINDS[e.kind], []).append((service.ttl, e.address))
    name = localtargets_name(service)
    for rtype, rdatas in by_type.items():
        yield name, zone, rtype, tuple(rdatas)


def heartbeat_rrsets(config: Config, snapshot: Snapshot) -> Iterator[RRset]:
    """The heartbeat TXT RRset of this site in every zone."""
    beat = ((HEARTBEAT_TTL, heartbeat_rdata(snapshot.evaluated_at)),)
    for zone in config.zones:
        yield heartbeat_name(config.site.name, zone.origin), zone, "TXT", beat


def merged_endpoints(service: Service, snapshot: Snapshot, peers: frozenset[str]) -> tuple[Endpoint, ...]:
    """The candidates of a service's policy: configured endpoints that are not of a peer site (`peers`:
    `peer_site_names(config)`), then the endpoints learned from peer sites."""
    learned = snapshot.peer_endpoints.get(service.name, ())
    if not peers:
        return service.endpoints + learned
    return tuple(e for e in service.endpoints if e.site not in peers) + learned


def counted_endpoints(service: Service, snapshot: Snapshot, peers: frozenset[str]) -> tuple[Endpoint, ...]:
    """The endpoints of a service that count now: its policy's candidates (`merged_endpoints`) that
    are answerable (health and admin state applied). The answers, the gauges and the API all use this."""
    return tuple(e for e in merged_endpoints(service, snapshot, peers) if effective_up(e, snapshot))
