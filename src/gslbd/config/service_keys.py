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
    "endpoints",
    "https",
    "srv",
    "min_healthy",
    "bias",
    "select",
)
ENDPOINT_KEYS = (
    "address",
    "site",
    "locality",
    "weight",
    "priority",
    "check",
    "probe_address",
    "admin",
    "tags",
)
