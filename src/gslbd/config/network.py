"""The sections about places and plumbing: site, dns, api, sites, topology, cluster, peers."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

from gslbd.config.fields import (
    Invalid,
    MapReader,
    Report,
    as_map,
    boolean,
    duration,
    enum,
    integer,
    is_null,
    nonempty_string,
    number,
    site_name,
    string,
)
from gslbd.config.loader import Node, Scalar, Seq
from gslbd.config.names import hostport
from gslbd.config.protect import read_cookies, read_rrl, warn_readable_secret_file
from gslbd.config.tsig import read_tsig
from gslbd.config.urls import parse_redis_url
from gslbd.model.config import (
    MAX_THREADS,
    ApiConfig,
    ClusterConfig,
    DnsConfig,
    ListenAddress,
    PeersConfig,
    PeerSite,
    RedisConfig,
    SiteConfig,
    StateConfig,
)
from gslbd.model.topology import IPNetwork, Locality, NetworkEntry, SiteInfo, Topology
from gslbd.types import Discover, SyncMode

_LOCALITY_PART = re.compile(r"[a-z0-9-]+\Z")


def _locality_part(what: str) -> Callable[[Node], str]:
    def conv(node: Node) -> str:
        value = string(node)
        if not _LOCALITY_PART.match(value) or len(value) > 63:
            raise Invalid(f"invalid {what} {value!r}; must match [a-z0-9-]+ (it is used in DNS names)")
        return value

    return conv


_region = _locality_part("region")
_zone = _locality_part("zone")


def read_locality(rep: Report, node: Node, path: str, line: int) -> Locality:
    """`{region: x, zone: y}`; both optional. Invalid input gives an empty locality (and a problem)."""
    r = as_map(rep, node, path, line)
    if r is None:
        return Locality()
    r.check_keys(("region", "zone"))
    region = r.opt("region", _region)
    zone = r.opt("zone", _zone)
    if zone is not None and not r.has("region"):
        r.warn("zone", "a locality zone without a region is never matched by region")
    return Locality(region, zone)


def opt_locality(r: MapReader, key: str = "locality") -> Locality | None:
    node = r.node_of(key)
    if node is None:
        return None
    return read_locality(r.rep, node, r.at(key), r.key_line(key))


def read_site(r: MapReader | None) -> tuple[SiteConfig, bool]:
    """This site; the flag says whether `site.locality` was written."""
    if r is None:
        return SiteConfig(), False
    r.check_keys(("name", "locality"))
    name = r.get("name", site_name, "local")
    locality = opt_locality(r)
    return SiteConfig(name, locality or Locality()), locality is not None


def _empty_list(r: MapReader, key: str) -> bool:
    node = r.node_of(key)
    return isinstance(node, Seq) and not node.items


def _unique_addresses(r: MapReader, found: list[tuple[ListenAddress, str, int]]) -> None:
    seen: set[ListenAddress] = set()
    for addr, path, line in found:
        if addr in seen:
            r.rep.error(line, path, f"duplicate address {addr}")
        seen.add(addr)


def read_dns(r: MapReader | None) -> DnsConfig:
    if r is None:
        return DnsConfig()
    r.check_keys(
        (
            "listen",
            "workers",
            "threads",
            "max_udp_payload",
            "tcp_idle_timeout",
            "lame_duck",
            "tcp_backlog",
            "rrl",
            "cookies",
            "identity",
            "version",
        )
    )
    listen = DnsConfig().listen
    found = r.list_of("listen", hostport(53, min_port=0))
    if found is not None:
        _unique_addresses(r, found)
        if _empty_list(r, "listen"):
            r.error("listen", "must list at least one address")
        if found:
            listen = tuple(a for a, _, _ in found)
    return DnsConfig(
        listen=listen,
        workers=r.get("workers", integer(1, 1024), 1),
        threads=r.get("threads", integer(1, MAX_THREADS), 1),
        max_udp_payload=r.get("max_udp_payload", integer(512, 65535), 1232),
        tcp_idle_timeout=r.get("tcp_idle_timeout", duration(), 10.0),
        lame_duck=r.get("lame_duck", duration(positive=False), 2.0),
        tcp_backlog=r.get("tcp_backlog", integer(1, 65535), 1024),
        rrl=read_rrl(r.sub("rrl")),
        cookies=read_cookies(r.sub("cookies")),
        identity=r.opt("identity", _identity),
        version=r.opt("version", _txt_text("version")),
    )


_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def _txt_text(what: str) -> Callable[[Node], str]:
    def conv(node: Node) -> str:
        value = nonempty_string(node)
        if len(value.encode("utf-8")) > 250:
            raise Invalid(f"{what} is {len(value.encode('utf-8'))} bytes; at most 250 (one TXT string)")
        if not value.isprintable():
            raise Invalid(f"{what} must be printable text")
        return value

    return conv


def _identity(node: Node) -> str:
    """`dns.identity`: printable text of at most 250 bytes; the only placeholder is {worker}."""
    value = _txt_text("identity")(node)
    for name in _PLACEHOLDER.findall(value):
        if name != "worker":
            raise Invalid(f"unknown placeholder {{{name}}} in identity; the only one is {{worker}}")
    if value.replace("{worker}", "").count("{") or value.replace("{worker}", "").count("}"):
        raise Invalid("unbalanced brace in identity; the only placeholder is {worker}")
    return value


def read_api(r: MapReader | None) -> ApiConfig | None:
    if r is None:
        return None
    r.check_keys(("listen", "token", "token_file"))
    listen = r.req("listen", hostport(None, min_port=0))
    token = r.opt("token", nonempty_string)
    token_file = r.opt("token_file", nonempty_string)
    if r.has("token") and r.has("token_file"):
        r.error("token_file", "give either token or token_file, not both")
    elif token_file is not None:
        path = r.rep.resolve_path(token_file)
        token_file = str(path)
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            r.error("token_file", f"cannot read token file {token_file!r}: {why}")
        else:
            if not token:
                r.error("token_file", f"token file {token_file!r} is empty")
            else:
                warn_readable_secret_file(r, "token_file", path, "token file")
    if listen is None:
        return None
    if token is None and not r.has("token_file") and not ipaddress.ip_address(listen.host).is_loopback:
        r.warn("listen", f"no token: anyone who reaches {listen} can change state through the API")
    return ApiConfig(listen, token or None, token_file)


def read_state(r: MapReader | None) -> StateConfig:
    """`state: {file: PATH}`: where run-time admin states are kept (relative to the config's directory)."""
    if r is None:
        return StateConfig()
    r.check_keys(("file",))
    text = r.opt("file", nonempty_string)
    if text is None:
        return StateConfig()
    path = r.rep.resolve_path(text)
    if path.is_dir():
        r.error("file", f"state file {str(path)!r} is a directory")
    elif not path.parent.is_dir():
        r.error("file", f"the directory of state file {str(path)!r} does not exist")
    return StateConfig(str(path))


def _coordinates(node: Node) -> tuple[float, float]:
    if not isinstance(node, Seq) or len(node.items) != 2:
        raise Invalid("expected [latitude, longitude]")
    out: list[float] = []
    for what, lo, hi, item in (("latitude", -90, 90, node.items[0]), ("longitude", -180, 180, node.items[1])):
        try:
            out.append(number(lo, hi)(item))
        except Invalid as exc:
            raise Invalid(f"{what} {exc.message}") from None
    return out[0], out[1]


def read_sites(r: MapReader | None) -> dict[str, tuple[SiteInfo, bool]]:
    """`sites:` by name; the flag says whether the entry wrote a locality."""
    out: dict[str, tuple[SiteInfo, bool]] = {}
    if r is None:
        return out
    for entry in r.node.entries:
        path = r.at(entry.key)
        try:
            site_name(Scalar(entry.key_line, entry.key))
        except Invalid as exc:
            r.rep.error(entry.key_line, path, exc.message)
            continue
        if is_null(entry.value):
            out[entry.key] = (SiteInfo(entry.key), False)
            continue
        s = as_map(r.rep, entry.value, path, entry.key_line)
        if s is None:
            continue
        s.check_keys(("locality", "coordinates"))
        locality = opt_locality(s)
        coordinates = s.opt("coordinates", _coordinates)
        out[entry.key] = (SiteInfo(entry.key, locality or Locality(), coordinates), locality is not None)
    return out


def read_topology(r: MapReader | None) -> Topology:
    if r is None:
        return Topology()
    r.check_keys(("networks", "geoip", "use_client_subnet"))
    networks: list[NetworkEntry] = []
    seen: dict[IPNetwork, str] = {}
    for item, path in r.items("networks"):
        n = as_map(r.rep, item, path)
        if n is None:
            continue
        n.check_keys(("cidr", "site", "locality"))
        cidr = n.req("cidr", _cidr)
        site = n.opt("site", site_name)
        locality = opt_locality(n)
        if not n.has("site") and not n.has("locality"):
            r.rep.error(n.line, path, "a network needs a site or a locality")
        if cidr is None:
            continue
        if cidr in seen:
            n.error("cidr", f"duplicate network {cidr} (also {seen[cidr]})")
            continue
        seen[cidr] = path
        networks.append(NetworkEntry(cidr, site, locality or Locality()))
    database = line = asn = None
    geoip = r.sub("geoip")
    if geoip is not None:
        geoip.check_keys(("database", "asn_database"))
        if not geoip.has("asn_database") or geoip.has("database"):
            text = geoip.req("database", nonempty_string)
            if text is not None:
                database, line = _database_file(geoip, "database", text, "GeoIP"), geoip.line_of("database")
        text = geoip.opt("asn_database", nonempty_string)
        if text is not None:
            asn = _database_file(geoip, "asn_database", text, "ASN")
    return Topology(tuple(networks), database, r.get("use_client_subnet", boolean, True), line, asn)


def _database_file(r: MapReader, key: str, text: str, what: str) -> str:
    """A database path resolved against the config's folder; a missing file is reported."""
    file = r.rep.resolve_path(text)
    if not file.is_file():
        r.error(key, f"{what} database {str(file)!r} is not a file that exists")
    return str(file)


def _cidr(node: Node) -> IPNetwork:
    text = string(node).strip()
    try:
        return ipaddress.ip_network(text)
    except ValueError as exc:
        raise Invalid(f"invalid network {text!r}: {exc}") from None


def _redis_url(node: Node) -> str:
    text = nonempty_string(node).strip()
    try:
        parse_redis_url(text)
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    return text


def read_cluster(r: MapReader | None) -> ClusterConfig | None:
    if r is None:
        return None
    r.check_keys(("redis",))
    redis = r.sub("redis")
    if redis is None:
        if not r.has("redis"):
            r.missing("redis")
        return None
    redis.check_keys(("url", "password", "key_prefix", "sync_mode"))
    url = redis.req("url", _redis_url)
    password = redis.opt("password", string)
    config = RedisConfig(
        url=url or "redis://127.0.0.1:6379/0",
        password=password or None,
        key_prefix=redis.get("key_prefix", string, "gslb:"),
        sync_mode=redis.get("sync_mode", _sync_mode, SyncMode.LOCK),
    )
    return ClusterConfig(config) if url is not None else None


_sync_mode = enum(SyncMode, "sync_mode")


def read_peers(r: MapReader | None, this_site: str) -> PeersConfig | None:
    if r is None:
        return None
    r.check_keys(
        (
            "interval",
            "stale_after",
            "timeout",
            "notify",
            "sites",
            "discover",
            "port",
            "tsig",
            "transfer",
            "journal",
            "quorum",
        )
    )
    interval = r.get("interval", duration(), 5.0)
    stale_after = r.get("stale_after", duration(), 300.0)
    timeout = r.get("timeout", duration(), 1.0)
    discover = r.get("discover", enum(Discover, "discover mode"), Discover.STATIC)
    if r.has("timeout") and timeout >= interval:
        r.error("timeout", f"timeout ({timeout:g}s) must be shorter than interval ({interval:g}s)")
    if r.has("stale_after") and stale_after <= interval:
        r.error("stale_after", f"stale_after ({stale_after:g}s) must be longer than interval ({interval:g}s)")
    sites: list[PeerSite] = []
    seen: dict[str, str] = {}
    for item, path in r.items("sites"):
        p = as_map(r.rep, item, path)
        if p is None:
            continue
        p.check_keys(("name", "nameservers"))
        name = p.req("name", site_name)
        found = p.list_of("nameservers", hostport(53))
        servers = tuple(a for a, _, _ in found or ())
        if name is None:
            continue
        if name == this_site:
            p.error("name", f"'{name}' is this site (site.name); a site is not its own peer")
            continue
        if name in seen:
            p.error("name", f"duplicate peer site '{name}' (also {seen[name]})")
            continue
        seen[name] = path
        if discover is Discover.STATIC and found is None and not p.has("nameservers"):
            p.missing("nameservers")
        elif discover is Discover.STATIC and _empty_list(p, "nameservers"):
            p.error("nameservers", "must list at least one nameserver (or set discover: ns)")
        if found:
            _unique_addresses(p, found)
        sites.append(PeerSite(name, servers))
    if not sites and discover is Discover.STATIC:
        r.rep.warn(r.line, r.at("sites"), "no peer sites: the exchange has nothing to poll")
    port = r.get("port", integer(1, 65535), 53)
    notify = r.get("notify", boolean, True)
    tsig = read_tsig(r.sub("tsig"))
    transfer = r.get("transfer", boolean, True)
    journal = r.get("journal", integer(1, 1_000_000), 1000)
    quorum = _read_quorum(r.sub("quorum"), len(sites) + 1, discover)
    if quorum is not None and not transfer:
        r.warn("quorum", "votes travel in the exchange zone: with transfer: false no site publishes any")
    return PeersConfig(
        interval, stale_after, timeout, notify, tuple(sites), discover, port, tsig, transfer, journal, quorum
    )


def _read_quorum(r: MapReader | None, sites: int, discover: Discover) -> int | None:
    """`peers.quorum: {votes: K}`: K >= 1 and, with the sites listed, at most their number (this site
    included). With `discover: ns` the sites are known only once the zones are read
    (config/discovery.py checks K there)."""
    if r is None:
        return None
    r.check_keys(("votes",))
    votes = r.req("votes", integer(1, 1000))
    if votes is not None and discover is Discover.STATIC and votes > sites:
        r.error("votes", quorum_too_large(votes, sites))
    return votes


def quorum_too_large(votes: int, sites: int) -> str:
    return (
        f"votes ({votes}) is more than the sites that can vote ({sites}: this site and its peers);"
        " no endpoint could ever be taken out"
    )
