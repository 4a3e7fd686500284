"""Metric definitions, named `gslbd_<subsystem>_<name>_<unit>`. Label values are bounded: check types,
results, rcodes, policies and configured service names; never client addresses or query names.

Counters that change per DNS query are not prometheus objects (too slow for the query path): the
server counts in plain integers and a collector registered by the composition root reads them at
scrape time.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    gc_collector,
    platform_collector,
    process_collector,
)

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
ENDPOINTS_UP = Gauge(
    "gslbd_health_endpoints_up",
    "Endpoints of a service that are answerable now (health and admin state applied).",
    ["service"],
    registry=REGISTRY,
)
ENDPOINTS = Gauge(
    "gslbd_health_endpoints",
    "Endpoints of a service (this site's and those learned from peers).",
    ["service"],
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
ADMIN_CHANGES = Counter(
    "gslbd_admin_changes_total",
    "Run-time admin state changes, by the new state (up, down or obey).",
    ["state"],
    registry=REGISTRY,
)
