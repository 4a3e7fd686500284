"""The whole validated configuration: the root of the model."""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from gslbd.model.check import Check
from gslbd.model.service import Service
from gslbd.model.topology import Locality, SiteInfo, Topology
from gslbd.model.tsig import TsigKey
from gslbd.model.zone import Zone
from gslbd.types import Discover, LogFormat, LogLevel, SyncMode


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """A host and port to listen on; `host` has no brackets ("::1", "127.0.0.1")."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class SiteConfig:
    """This instance's place in the world (k8gb's geo tag)."""

    name: str = "local"
    locality: Locality = Locality()


@dataclass(frozen=True, slots=True)
class RrlConfig:
    """Response rate limiting (`dns.rrl`, docs/rrl.md), as BIND and Knot do it. Rates are responses per
    second per bucket (0 = that kind is not limited); `window` is seconds; `slip` = every Nth limited
    response is sent truncated (TC=1) instead of dropped (0 = drop all, 1 = truncate all); `exempt`
    networks are never limited."""

    responses_per_second: int = 20
    errors_per_second: int = 20
    nxdomains_per_second: int = 20
    window: float = 15.0
    slip: int = 2
    ipv4_prefix_length: int = 24
    ipv6_prefix_length: int = 56
    exempt: tuple[str, ...] = ()  # CIDR texts, normalised ("10.0.0.0/8")


@dataclass(frozen=True, slots=True)
class CookieConfig:
    """DNS cookies (`dns.cookies`, RFC 7873/9018, docs/cookies.md). `secret` is the 16-byte SipHash key,
    read from `secret_file` by the loader; None = a random secret drawn once per start (and handed to the
    worker processes)."""

    secret_file: str | None = None
    secret: bytes | None = field(default=None, repr=False)


# `dns.threads` at most: a loop per core of the largest machines DNS servers run on (beyond the core
# count the loops only contend for the guard's and the table slot's mutexes, docs/server.md *Threads*);
# each loop holds 512 KiB of batch buffers and one socket per listen address.
MAX_THREADS = 64


@dataclass(frozen=True, slots=True)
class DnsConfig:
    """DNS listeners. Durations are seconds."""

    listen: tuple[ListenAddress, ...] = (ListenAddress("0.0.0.0", 53),)
    workers: int = 1
    max_udp_payload: int = 1232
    tcp_idle_timeout: float = 10.0
    lame_duck: float = 2.0  # after SIGTERM: /readyz fails while DNS still answers, for this long
    tcp_backlog: int = 1024  # listen(2) backlog of every TCP socket
    rrl: RrlConfig | None = None  # off when absent
    cookies: CookieConfig | None = None  # off when absent
    # NSID (RFC 5001) and CHAOS TXT id.server./hostname.bind.; "{worker}" becomes the worker number.
    identity: str | None = None
    # CHAOS TXT version.bind./version.server.; None = hidden (REFUSED).
    version: str | None = None
    # C UDP loops per listen address, each a thread on its own SO_REUSEPORT socket, all answering from
    # the one table, signer and guard of this process (docs/server.md, *Threads*).
    threads: int = 1


@dataclass(frozen=True, slots=True)
class ApiConfig:
    """The HTTP admin API. `token` is already read from `token_file` when that was given."""

    listen: ListenAddress
    token: str | None = None
    token_file: str | None = None


@dataclass(frozen=True, slots=True)
class StateConfig:
    """Where run-time admin states are kept: `file` (an absolute path) or None = in memory only."""

    file: str | None = None


@dataclass(frozen=True, slots=True)
class RunAs:
    """`run_as`: the user (and group) a gslbd started as root becomes once every socket is bound.
    Names or numeric ids, as written; `group` None = the user's primary group."""

    user: str
    group: str | None = None


@dataclass(frozen=True, slots=True)
class SafetyRule:
    """One item of `safety`: the services whose names match the glob `services` must keep at least
    `min_sites_up` sites with an answerable endpoint and `min_endpoints_up` answerable endpoints (None:
    not asked). `index` is its place in the list; `line` where it is written (None: not from a file)."""

    index: int
    services: str = "*"
    min_sites_up: int | None = None
    min_endpoints_up: int | None = None
    line: int | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        """The rule's name in messages and in the metric's label: `safety[0]`."""
        return f"safety[{self.index}]"

    def text(self) -> str:
        """The rule as written, e.g. `safety[0] (min_sites_up: 2, services: "*")`."""
        parts = [f"{key}: {value}" for key, value in self.minimums()]
        parts.append(f'services: "{self.services}"')
        return f"{self.name} ({', '.join(parts)})"

    def covers(self, service: str) -> bool:
        """Does the glob match this service name? Absolute or not, case does not matter: "app.*" and
        "app.*." both cover "app.gslb.example.com."."""
        return fnmatchcase(service.lower().rstrip("."), self.services.lower().rstrip("."))

    def minimums(self) -> list[tuple[str, int]]:
        """The minimums asked, as (key, number), sites first."""
        out = [("min_sites_up", self.min_sites_up), ("min_endpoints_up", self.min_endpoints_up)]
        return [(key, value) for key, value in out if value is not None]


@dataclass(frozen=True, slots=True)
class RedisConfig:
    url: str
    password: str | None = None
    key_prefix: str = "gslb:"
    sync_mode: SyncMode = SyncMode.LOCK


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    redis: RedisConfig


@dataclass(frozen=True, slots=True)
class PeerSite:
    """A peer site and the "host:port" addresses of its nameservers."""

    name: str
    nameservers: tuple[ListenAddress, ...] = ()


@dataclass(frozen=True, slots=True)
class PeersConfig:
    """Multi-site exchange over DNS. Durations are seconds. With `discover: ns` the loader has already
    added the sites found in the zones' NS names to `sites` (see config/discovery.py)."""

    interval: float = 5.0
    stale_after: float = 300.0
    timeout: float = 1.0
    notify: bool = True
    sites: tuple[PeerSite, ...] = ()
    discover: Discover = Discover.STATIC
    port: int = 53  # the port of peer nameservers found by `discover: ns` (their NS glue has no port)
    tsig: TsigKey | None = None  # signs every poll, reply and NOTIFY between the sites when set
    transfer: bool = True  # serve this site's exchange zone (AXFR/IXFR) and poll peers by its SOA serial
    journal: int = 1000  # exchange zone versions kept for IXFR (older serials get a full transfer)
    # peers.quorum.votes: an endpoint is down for answering when at least this many sites (its own
    # included) see it down; every site then probes the other sites' endpoints too (None: no quorum,
    # every site judges its own endpoints alone). See state/quorum.py.
    quorum: int | None = None


@dataclass(frozen=True, slots=True)
class DnstapConfig:
    """The dnstap query log: Frame Streams to the unix socket `socket` or appended to the file `file`
    (one of the two, an absolute path), with an AUTH_QUERY message per query when `queries` and an
    AUTH_RESPONSE per answer when `responses`."""

    socket: str | None
    queries: bool = True
    responses: bool = True
    file: str | None = None

    @property
    def path(self) -> str:
        """Where the log goes: the socket or the file."""
        return self.socket if self.socket is not None else str(self.file)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """How gslbd logs: `format` text or json (one object per line), the least severe `level` shown, and
    the dnstap query log (None: off). `gslbd serve --log-format/--log-level` win over format and level."""

    format: LogFormat = LogFormat.TEXT
    level: LogLevel = LogLevel.INFO
    dnstap: DnstapConfig | None = None


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """`audit`: the cross-site consistency audit run inside the server every `every` seconds over
    `sample` services drawn at random (0 = every service), as `gslbd audit` does (docs/operations.md)."""

    every: float = 60.0
    sample: int = 100


@dataclass(frozen=True, slots=True)
class Config:
    """A whole, validated configuration. `source` is the file it came from."""

    version: int = 1
    site: SiteConfig = SiteConfig()
    dns: DnsConfig = DnsConfig()
    api: ApiConfig | None = None
    zones: tuple[Zone, ...] = ()
    checks: tuple[Check, ...] = ()
    services: tuple[Service, ...] = ()
    topology: Topology = Topology()
    sites: tuple[SiteInfo, ...] = ()  # every known site, this one included
    cluster: ClusterConfig | None = None
    peers: PeersConfig | None = None
    state: StateConfig = StateConfig()
    log: LogConfig = LogConfig()
    run_as: RunAs | None = None
    audit: AuditConfig | None = None  # the periodic audit is off when absent
    safety: tuple[SafetyRule, ...] = ()
    source: str = field(default="<memory>", compare=False)

    def site_info(self, name: str) -> SiteInfo | None:
        for s in self.sites:
            if s.name == name:
                return s
        return None
