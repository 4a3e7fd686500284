"""DNS counters exposed to Prometheus at scrape time.

The query path counts in plain integers (prometheus objects are too slow per query); this collector
reads them through `Control.dns_counters()` when /metrics is scraped. Label values are bounded:
transports, rcode mnemonics, policy names and server counter names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from gslbd import metrics
from gslbd.api.control import DnsCounters

QUERIES = "gslbd_dns_queries"
POLICY_ANSWERS = "gslbd_dns_policy_answers"
SERVER_EVENTS = "gslbd_dns_server_events"


class DnsCollector(Collector):
    """Reads `counters()` at every scrape and yields the DNS counter families."""

    def __init__(self, counters: Callable[[], DnsCounters]) -> None:
        self._counters = counters

    def collect(self) -> Iterator[CounterMetricFamily]:
        c = self._counters()
        queries = CounterMetricFamily(
            QUERIES, "DNS responses sent, by transport (udp or tcp) and rcode.", labels=["transport", "rcode"]
        )
        for (transport, rcode), n in sorted(c.queries.items()):
            queries.add_metric([transport, rcode], n)
        yield queries
        policy = CounterMetricFamily(
            POLICY_ANSWERS,
            "Answers decided by a service's load-balancing policy, by policy.",
            labels=["policy"],
        )
        for name, n in sorted(c.policy_answers.items()):
            policy.add_metric([name], n)
        yield policy
        events = CounterMetricFamily(
            SERVER_EVENTS,
            "DNS listener events by name (udp_dropped, tcp_connections, handler_errors, ...).",
            labels=["event"],
        )
        for name, n in sorted(c.events.items()):
            events.add_metric([name], n)
        yield events


class MetricsExporter:
    """Renders /metrics: the shared `metrics.REGISTRY`, the per-service gauges (written by
    `metrics.SERVICE_ENDPOINTS.text()`, which keeps each service's lines) and this instance's DNS counters.

    The DNS collector lives in a registry of its own, so several API servers in one process (tests)
    never register the same names twice in the shared registry.
    """

    def __init__(self, counters: Callable[[], DnsCounters]) -> None:
        self._own = CollectorRegistry(auto_describe=False)
        self._own.register(DnsCollector(counters))

    def render(self) -> bytes:
        return (
            generate_latest(metrics.REGISTRY) + metrics.SERVICE_ENDPOINTS.text() + generate_latest(self._own)
        )
