"""The keys of a `services[]` entry and of its endpoints (the located validator's and the fast path's)."""

from __future__ import annotations

SERVICE_KEYS = (
    "name",
    "zone",
    "policy",
    "failover_order",
    "weights",
    "ttl",
    "max_answers",
    "all_down",
    "fallback",
    "locality_names",
    "check",
    "health",
    "endpoints",
    "https",
    "srv",
    "min_healthy",
    "bias",
    "select",
    "pools",
    "rules",
    "failover_delay",
    "failback_delay",
)
ENDPOINT_KEYS = (
    "address",
    "site",
    "locality",
    "weight",
    "priority",
    "check",
    "checks",
    "health",
    "probe_address",
    "admin",
    "tags",
)
