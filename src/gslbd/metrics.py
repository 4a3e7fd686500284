"""Metric definitions, named `gslbd_<subsystem>_<name>_<unit>`. Label values are bounded: check types,
results, rcodes, policies and configured service names; never client addresses or query names.

Counters that change per DNS query are not prometheus objects (too slow for the query path): the
server counts in plain integers and a collector registered by the composition root reads them at
scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

_number: Callable[[float], str] = floatToGoString  # a sample's value as generate_latest writes it

REGISTRY = CollectorRegistry(auto_describe=True)
process_collector.ProcessCollector(registry=REGISTRY)
platform_collector.PlatformCollector(registry=REGISTRY)
gc_collector.GCCollector(registry=REGISTRY)

PROBES = Counter(
    "gslbd_health_probes_total",
    "Health probes finished, by check type and result (success or failure).",
    ["type", "result"],
    registry=REGISTRY,
)
PROBE_DURATION = Histogram(
    "gslbd_health_probe_duration_seconds",
    "Time one health probe took, by check type.",
    ["type"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=REGISTRY,
)
TRANSITIONS = Counter(
    "gslbd_health_transitions_total",
    "Endpoint verdict changes, by the new state (up or down).",
    ["to"],
    registry=REGISTRY,
)

ENDPOINT_CHECK_UP = Gauge(
    "gslbd_endpoint_check_up",
    "Per endpoint with several checks (endpoints[].checks), each check's own verdict: 1 up (or no "
    "result yet), 0 down; the endpoint's combined verdict follows its health: all|any.",
    ["service", "address", "check"],
    registry=REGISTRY,
)


class AnswerSites(Collector):
    """gslbd_service_answer_site_info{service,site}, read at scrape time from `source` (app/answered.py
    keeps the sites per service): no labelled gauge objects to set at every change."""

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[tuple[str, Iterable[str]]]] | None = None

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        source = self.source
        if source is not None:
            for service, sites in source():
                for site in sorted(sites):
                    family.add_metric([service, site], 1)
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "gslbd_service_answer_site_info",
            "1 for each site whose endpoints a failover service's A/AAAA answers hold now (any client, any "
            "variant); a site that left the answer has no sample.",
            labels=["service", "site"],
        )


SERVICE_ANSWER_SITE = AnswerSites()
REGISTRY.register(SERVICE_ANSWER_SITE)
SERVICE_FAILOVERS = Counter(
    "gslbd_service_failovers_total",
    "Failover events of a failover service: its preferred site (failover_order's first, else the site of "
    "its first endpoint) left the answer (direction away) or came back to it (direction back).",
    ["service", "direction"],
    registry=REGISTRY,
)


class ServiceEndpoints(Collector):
    """gslbd_health_endpoints{_up} per configured service, read at scrape time from `source` (the
    committed generation's counts, set by the composition root): no labelled gauge objects, which cost
    150 MB and seconds to set at 100,000 services.

    /metrics writes them with `text()`, not through prometheus_client's sample loop, which took 1.9 s
    of CPU (on the event loop) per scrape at 100,000 services: each service's two lines are kept with
    the figures they were written from and written again only when those change, so a scrape costs a
    look-up per service. `collect()` gives the same samples to a registry (SERVICE_REGISTRY) and is the
    reference `text()` is tested against, byte for byte."""

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[tuple[str, int, int]]] | None = None  # (service, up, known)
        self._lines: dict[str, tuple[int, int, str, str]] = {}  # service -> (up, known, its two lines)
        up, known = self._families()
        self._heads = (_head(up), _head(known))
        self._names = (up.name, known.name)

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        up, known = self._families()
        source = self.source
        if source is not None:
            for name, count_up, count_known in source():
                up.add_metric([name], count_up)
                known.add_metric([name], count_known)
        yield up
        yield known

    def text(self) -> bytes:
        """Both families in the Prometheus text format, as generate_latest writes `collect()`."""
        before, now = self._lines, {}
        ups: list[str] = [self._heads[0]]
        knowns: list[str] = [self._heads[1]]
        source, (up_name, known_name) = self.source, self._names
        for name, up, known in source() if source is not None else ():
            lines = before.get(name)
            if lines is None or lines[0] != up or lines[1] != known:
                label = (
                    '{service="' + name.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"") + '"} '
                )
                lines = (
                    up,
                    known,
                    f"{up_name}{label}{_number(up)}\n",
                    f"{known_name}{label}{_number(known)}\n",
                )
            now[name] = lines
            ups.append(lines[2])
            knowns.append(lines[3])
        self._lines = now  # services that went away are forgotten
        return ("".join(ups) + "".join(knowns)).encode()

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "gslbd_health_endpoints_up",
                "Endpoints of a service that are answerable now (health and admin state applied).",
                labels=["service"],
            ),
            GaugeMetricFamily(
                "gslbd_health_endpoints",
                "Endpoints of a service (this site's and those learned from peers).",
                labels=["service"],
            ),
        )


class _One(Collector):
    def __init__(self, family: Metric) -> None:
        self.family = family

    def collect(self) -> Iterator[Metric]:
        yield self.family


def _head(family: Metric) -> str:
    """A family's `# HELP` and `# TYPE` lines, as generate_latest writes them."""
    return generate_latest(_One(family)).decode()


SERVICE_ENDPOINTS = ServiceEndpoints()
# The per-service gauges as a registry (for reading a sample: SERVICE_REGISTRY.get_sample_value); /metrics
# writes them with SERVICE_ENDPOINTS.text() after REGISTRY (api/collector.py).
SERVICE_REGISTRY = CollectorRegistry(auto_describe=False)
SERVICE_REGISTRY.register(SERVICE_ENDPOINTS)
WORKER_UPDATES = Counter(
    "gslbd_dns_worker_updates_total",
    "Changes sent to the DNS worker processes (dns.workers > 1), by what was sent: `config` (a new "
    "config and the whole snapshot), `services` (only the services a reload changed, with their "
    "entries), `snapshot` (the verdicts, overrides and learned endpoints of the services a change touched).",
    ["kind"],
    registry=REGISTRY,
)
NAMES_PENDING = Gauge(
    "gslbd_dns_names_pending",
    "Names of the answer table not compiled yet, and services not built yet (a large view is built "
    "and compiled in steps after a full build; the slow path answers them meanwhile).",
    registry=REGISTRY,
)
TABLE_REBUILDS = Counter(
    "gslbd_answer_table_rebuilds_total",
    "Answer tables compiled and swapped in (after a health, admin or config change).",
    registry=REGISTRY,
)
TABLE_REBUILD_SECONDS = Histogram(
    "gslbd_answer_table_rebuild_seconds",
    "Time to build the view and compile the answer table.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
    registry=REGISTRY,
)
CONFIG_RELOADS = Counter(
    "gslbd_config_reloads_total",
    "Configuration reloads, by result (applied or refused).",
    ["result"],
    registry=REGISTRY,
)
CONFIG_RELOAD_FAILURES = Counter(
    "gslbd_config_reload_failures",
    "Configuration reloads refused (the previous configuration kept serving).",
    registry=REGISTRY,
)
CONFIG_LAST_RELOAD_SUCCESS = Gauge(
    "gslbd_config_last_reload_success",
    "1 when the last configuration load (start or reload) was applied, 0 when the last reload was refused.",
    registry=REGISTRY,
)
ADMIN_CHANGES = Counter(
    "gslbd_admin_changes_total",
    "Run-time admin state changes, by the new state (up, down or obey).",
    ["state"],
    registry=REGISTRY,
)
SAFETY_RULE_BROKEN = Gauge(
    "gslbd_safety_rule_broken",
    "1 while a safety rule (label rule: safety[N], its place in the config's list) is broken for at least "
    "one service it covers, 0 while it holds.",
    ["rule"],
    registry=REGISTRY,
)
PEER_LAST_ANSWER_AGE = Gauge(
    "gslbd_exchange_peer_last_answer_age_seconds",
    "Seconds since a peer site last answered a whole poll (absent until its first answer).",
    ["peer"],
    registry=REGISTRY,
)
PEER_QUERY_ERRORS = Counter(
    "gslbd_exchange_peer_query_errors_total",
    "Queries to a peer site's nameservers that failed (timeout, network error, error rcode, bad reply), "
    "and polls that missed their deadline.",
    ["peer"],
    registry=REGISTRY,
)
PEER_LOAD_GARBAGE = Counter(
    "gslbd_exchange_peer_load_garbage_total",
    "Load figures a peer site published that this site could not read (ignored).",
    ["peer"],
    registry=REGISTRY,
)
PEER_ENDPOINTS = Gauge(
    "gslbd_exchange_peer_endpoints",
    "Endpoint addresses learned from a peer site that count now (0 while the peer is stale).",
    ["peer"],
    registry=REGISTRY,
)
PEER_STALE = Gauge(
    "gslbd_exchange_peer_stale",
    "1 while a peer site is stale (no answer or heartbeat within stale_after: its endpoints do not count).",
    ["peer"],
    registry=REGISTRY,
)
PEER_HEARD = Gauge(
    "gslbd_exchange_peer_heard",
    "1 while a peer site is heard (fresh and its latest poll answered): what partition safety counts.",
    ["peer"],
    registry=REGISTRY,
)
EXCHANGE_PARTITIONED = Gauge(
    "gslbd_exchange_partitioned",
    "1 while this site hears fewer than a majority of the sites (peers.quorum): remote endpoints keep"
    " their last agreed verdicts (fail static).",
    registry=REGISTRY,
)
QUORUM_VOTES = Gauge(
    "gslbd_quorum_votes",
    "Sites (this one and the fresh peers) whose latest vote on an endpoint is `verdict` (peers.quorum).",
    ["service", "address", "verdict"],
    registry=REGISTRY,
)
PEER_RTT = Gauge(
    "gslbd_exchange_peer_rtt_seconds",
    "Smoothed round trip to a peer site's nameserver, measured by the heartbeat query of per-name polls.",
    ["peer"],
    registry=REGISTRY,
)
PEER_POLLS = Counter(
    "gslbd_exchange_peer_polls_total",
    "Polls of a peer site (every service's localtargets and its heartbeat), by result (ok or failed).",
    ["peer", "result"],
    registry=REGISTRY,
)
NOTIFY_SENT = Counter(
    "gslbd_exchange_notify_sent_total",
    "DNS NOTIFY messages sent to peer nameservers, by result (ok: answered, failed: no answer).",
    ["result"],
    registry=REGISTRY,
)
NOTIFY_RECEIVED = Counter(
    "gslbd_exchange_notify_received_total",
    "DNS NOTIFY messages received, by result (accepted: from a peer, refused: unknown source or zone).",
    ["result"],
    registry=REGISTRY,
)
EXCHANGE_TRANSFERS = Counter(
    "gslbd_exchange_transfers_total",
    "Transfers of this site's exchange zone served, by kind (ixfr: a difference, current: the serial was "
    "current, axfr: the whole zone, refused: not a peer or not signed).",
    ["kind"],
    registry=REGISTRY,
)
PEER_CHANNEL_POLLS = Counter(
    "gslbd_exchange_peer_channel_polls_total",
    "Polls of a peer site by how they went (unchanged: the SOA serial had not changed, ixfr, axfr: "
    "transferred, per_name: polled name by name because the peer offers no exchange zone).",
    ["peer", "kind"],
    registry=REGISTRY,
)
REDIS_CONNECTED = Gauge(
    "gslbd_redis_connected",
    "1 while cluster mode's Redis is connected and subscribed, else 0 (local probing).",
    registry=REGISTRY,
)
REDIS_ERRORS = Counter(
    "gslbd_redis_errors_total",
    "Redis operations of cluster mode that failed, by operation (connect, subscribe, seed, lock, write, "
    "admin, release).",
    ["operation"],
    registry=REGISTRY,
)
CLUSTER_PROBES_SKIPPED = Counter(
    "gslbd_cluster_probes_skipped_total",
    "Probe cycles this instance skipped because another instance held the endpoint's lock.",
    registry=REGISTRY,
)
CLUSTER_RESULTS = Counter(
    "gslbd_cluster_results_total",
    "Raw health results fed into this instance's rise/fall machines in cluster mode, by source (probe: "
    "probed here; read: the health key; message: pub/sub; seed: the health key at start).",
    ["source"],
    registry=REGISTRY,
)
CLUSTER_RESULT_AGE = Gauge(
    "gslbd_cluster_result_age_seconds",
    "Seconds since the newest raw result of a probed endpoint (probed here or shared by another "
    "instance); NaN before the first. One series per configured endpoint.",
    ["service", "address"],
    registry=REGISTRY,
)
CONNECTION_BUDGET = Gauge(
    "gslbd_connection_budget_connections",
    "TCP connections one process may hold (DNS over TCP and the admin API together), derived from the "
    "open-file limit.",
    registry=REGISTRY,
)
CONNECTION_BUDGET_EVICTIONS = Counter(
    "gslbd_connection_budget_evictions_total",
    "Connections closed to make room for a new one when the connection budget was full, by the listener "
    "that needed the room (dns or api).",
    ["listener"],
    registry=REGISTRY,
)
API_BAD_REQUESTS = Counter(
    "gslbd_api_bad_requests_total",
    "HTTP requests the admin API could not parse (oversized or malformed request line or headers, bad "
    "framing); answered 400 (414 for a URL over 8,190 bytes) with a JSON error and logged at most once a "
    "minute.",
    registry=REGISTRY,
)
AUDIT_DIVERGENT = Gauge(
    "gslbd_audit_divergent_services",
    "Services a peer site answered differently from this site in the last audit run (audit:).",
    ["peer"],
    registry=REGISTRY,
)
AUDIT_RUNS = Counter(
    "gslbd_audit_runs_total",
    "Audit runs finished (audit:), each comparing this site's answers with every peer's.",
    registry=REGISTRY,
)

LOAD_FETCHES = Counter(
    "gslbd_load_fetches_total",
    "Load feedback fetches (endpoints[].load), by result: ok, garbage (a body that is no load figure: "
    "ignored) or unreachable (no answer, an HTTP error status or a timeout).",
    ["result"],
    registry=REGISTRY,
)
