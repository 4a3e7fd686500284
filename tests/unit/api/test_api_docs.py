"""docs/metrics.md and docs/api.md keep up with the code: every metric and every route is documented."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from api_support import FakeControl
from prometheus_client.parser import text_string_to_metric_families

from gslbd.api.collector import MetricsExporter
from gslbd.api.control import DnsCounters
from gslbd.api.server import ApiServer
from gslbd.model.config import ListenAddress

DOCS = Path(__file__).parents[3] / "docs"


def test_every_gslbd_metric_served_is_documented_in_metrics_md() -> None:
    counters = DnsCounters(
        queries=MappingProxyType({("udp", "NOERROR"): 1}),
        policy_answers=MappingProxyType({"geo": 1}),
        events=MappingProxyType({"tcp_evicted": 1}),
    )
    text = MetricsExporter(lambda: counters).render().decode()
    families = [
        f
        for f in text_string_to_metric_families(text)
        if f.name.startswith("gslbd_") and not f.name.endswith("_created")  # documented once, generally
    ]
    assert len(families) >= 12
    page = (DOCS / "metrics.md").read_text()
    assert "`_created`" in page
    for family in families:
        exposed = family.name + ("_total" if family.type == "counter" else "")
        assert f"`{exposed}`" in page, exposed


def test_every_route_is_documented_in_api_md() -> None:
    page = (DOCS / "api.md").read_text()
    server = ApiServer(FakeControl(), ListenAddress("127.0.0.1", 0), None)
    for route in server.app.router.routes():
        if route.method != "HEAD":
            assert f"| {route.method.ljust(4)} | `{route.resource.canonical}` |" in page, route
