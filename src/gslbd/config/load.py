"""Load feedback in the configuration (docs/policies/load.md):

    endpoints[].load / services[].load   {url, every: 5s, timeout: 2s, metric, half_life, on_missing}
    services[].weight_from               config | load (policy weighted)
    services[].shed_load                 {low, high} on any policy

An endpoint's own `load` wins over its service's (whole: the keys are not merged). Errors are located at
the dotted field path like every other validation error."""

from __future__ import annotations

import re
from collections.abc import Sequence

from gslbd.config.fields import Invalid, MapReader, duration, enum, number, string
from gslbd.config.loader import Node
from gslbd.model.load import LoadSource, OnMissing, ShedLoad, WeightFrom
from gslbd.model.service import Endpoint
from gslbd.types import PolicyName

LOAD_KEYS = ("url", "every", "timeout", "metric", "half_life", "on_missing")
SHED_KEYS = ("low", "high")
DEFAULT_EVERY = 5.0
DEFAULT_TIMEOUT = 2.0
HALF_LIFE_INTERVALS = 3  # half_life defaults to this many intervals
_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")


def _url(node: Node) -> str:
    value = string(node).strip()
    if not value.startswith(("http://", "https://")) or len(value) <= len("https://"):
        raise Invalid(f"expected an http:// or https:// URL, got {value!r}")
    return value


def _metric(node: Node) -> str:
    value = string(node)
    if not _METRIC.match(value):
        raise Invalid(f"{value!r} is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)")
    return value


def read_load(r: MapReader, key: str = "load") -> LoadSource | None:
    """`load: {...}` of a service or an endpoint; None when absent or invalid (then reported)."""
    sub = r.sub(key)
    if sub is None:
        if r.has(key):
            r.error(key, "expected a mapping: {url: http://{address}:9100/load, every: 5s}")
        return None
    sub.check_keys(LOAD_KEYS)
    url = sub.req("url", _url)
    every = sub.get("every", duration(), DEFAULT_EVERY)
    timeout = sub.get("timeout", duration(), min(DEFAULT_TIMEOUT, every))
    metric = sub.opt("metric", _metric)
    half_life = sub.get("half_life", duration(), HALF_LIFE_INTERVALS * every)
    on_missing = sub.get("on_missing", enum(OnMissing, "on_missing"), OnMissing.KEEP)
    if timeout > every:
        sub.error("timeout", f"timeout {timeout:g}s is longer than every {every:g}s")
        return None
    if url is None:
        return None
    return LoadSource(url, every, timeout, metric, half_life, on_missing)


def read_shed_load(r: MapReader) -> ShedLoad | None:
    """`shed_load: {low, high}`: watermarks of the load figure, 0 <= low < high."""
    sub = r.sub("shed_load")
    if sub is None:
        if r.has("shed_load"):
            r.error("shed_load", "expected a mapping: {low: 0.7, high: 0.9}")
        return None
    sub.check_keys(SHED_KEYS)
    low = sub.req("low", number(0.0))
    high = sub.req("high", number(0.0))
    if low is None or high is None:
        return None
    if low >= high:
        sub.error("low", f"low {low:g} is not below high {high:g}: the share falls between the two")
        return None
    return ShedLoad(low, high)


def read_weight_from(r: MapReader) -> WeightFrom:
    return r.get("weight_from", enum(WeightFrom, "weight_from"), WeightFrom.CONFIG)


def check_feedback(
    r: MapReader,
    policy: PolicyName,
    site_weights: bool,
    weight_from: WeightFrom,
    shed: ShedLoad | None,
    endpoints: Sequence[Endpoint],
    service_load: LoadSource | None,
) -> None:
    """What the keys mean together: weight_from and shed_load need load figures to work from."""
    reported = any(e.load is not None for e in endpoints)
    if weight_from is WeightFrom.LOAD:
        if policy is not PolicyName.WEIGHTED:
            r.warn("weight_from", f"weight_from is only used by the weighted policy (policy is {policy})")
        elif site_weights:
            r.error(
                "weight_from",
                "weight_from: load weighs endpoints by their load; it cannot be used with site weights",
            )
        if not reported:
            r.error(
                "weight_from", "weight_from: load needs a load source: services[].load or endpoints[].load"
            )
    if shed is not None and not reported:
        r.error("shed_load", "shed_load needs a load source: services[].load or endpoints[].load")
    if service_load is not None and "{address}" not in service_load.url and len(endpoints) > 1:
        r.rep.warn(
            r.line_of("load"),
            f"{r.at('load')}.url",
            "every endpoint reads the same URL: write {address} where the endpoint's address goes",
        )
