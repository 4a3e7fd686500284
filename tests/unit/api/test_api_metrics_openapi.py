"""/metrics exposes the shared registry and the DNS counters; the OpenAPI document covers every route."""

from __future__ import annotations

import asyncio
import re
from types import MappingProxyType

import aiohttp
from api_support import FakeControl, serving
from prometheus_client.parser import text_string_to_metric_families

from gslbd import metrics
from gslbd.api.collector import MetricsExporter
from gslbd.api.control import DnsCounters
from gslbd.api.server import ApiServer
from gslbd.model.config import ListenAddress


def test_metrics_serves_prometheus_text_with_every_gslbd_metric_and_the_dns_counters() -> None:
    async def body() -> tuple[int, str, str]:
        async with (
            serving(FakeControl()) as server,
            aiohttp.ClientSession() as session,
            session.get(f"{server.url}/metrics") as response,
        ):
            return response.status, response.headers["Content-Type"], await response.text()

    metrics.PROBES.labels(type="http", result="success").inc(0)
    status, content_type, text = asyncio.run(body())
    assert status == 200
    assert content_type.startswith("text/plain; version=0.0.4")
    assert 'gslbd_dns_queries_total{rcode="NOERROR",transport="udp"} 12.0' in text
    assert 'gslbd_dns_queries_total{rcode="NXDOMAIN",transport="udp"} 3.0' in text
    assert 'gslbd_dns_queries_total{rcode="NOERROR",transport="tcp"} 2.0' in text
    assert 'gslbd_dns_policy_answers_total{policy="failover"} 9.0' in text
    assert 'gslbd_dns_server_events_total{event="udp_dropped"} 1.0' in text
    names = {family.name for family in text_string_to_metric_families(text)}
    for expected in (
        "gslbd_health_probes",
        "gslbd_health_probe_duration_seconds",
        "gslbd_health_transitions",
        "gslbd_health_endpoints_up",
        "gslbd_health_endpoints",
        "gslbd_answer_table_rebuilds",
        "gslbd_answer_table_rebuild_seconds",
        "gslbd_config_reloads",
        "gslbd_admin_changes",
        "gslbd_dns_queries",
        "gslbd_dns_policy_answers",
        "gslbd_dns_server_events",
        "process_resident_memory_bytes",
    ):
        assert expected in names, expected


def test_dns_counters_are_read_at_every_scrape() -> None:
    counts = {("udp", "NOERROR"): 1}
    exporter = MetricsExporter(lambda: DnsCounters(queries=MappingProxyType(dict(counts))))
    assert 'gslbd_dns_queries_total{rcode="NOERROR",transport="udp"} 1.0' in exporter.render().decode()
    counts[("udp", "NOERROR")] = 41
    assert 'gslbd_dns_queries_total{rcode="NOERROR",transport="udp"} 41.0' in exporter.render().decode()


def test_two_api_servers_in_one_process_can_both_render_metrics() -> None:
    one = ApiServer(FakeControl(), ListenAddress("127.0.0.1", 0), None)
    two = ApiServer(FakeControl(), ListenAddress("127.0.0.1", 0), None)
    assert one._exporter.render().count(b"# TYPE gslbd_dns_queries_total counter") == 1
    assert two._exporter.render().count(b"# TYPE gslbd_dns_queries_total counter") == 1


def test_openapi_document_describes_every_route_and_method() -> None:
    async def body() -> tuple[int, dict[str, object], ApiServer]:
        async with (
            serving(FakeControl()) as server,
            aiohttp.ClientSession() as session,
            session.get(f"{server.url}/api/v1/openapi.json") as response,
        ):
            return response.status, await response.json(), server

    status, doc, server = asyncio.run(body())
    assert status == 200
    assert doc["openapi"] == "3.1.0"
    paths = doc["paths"]
    assert isinstance(paths, dict)
    routes = [(r.method, r.resource.canonical) for r in server.app.router.routes() if r.method != "HEAD"]
    # 11 (POST /api/v1/health and /api/v1/whatif among them) + GET /api/v1/peers + the console (page,
    # assets, /status, 5 JSON) + PUT /api/v1/admin + the endpoint overlay's POST, PATCH and DELETE
    assert len(routes) == 23
    for method, path in routes:
        assert path in paths, path
        assert method.lower() in paths[path], (method, path)
    # ...and nothing is documented that does not exist.
    documented = {(m.upper(), p) for p, ops in paths.items() for m in ops}
    assert documented == set(routes)
    # Every state-changing operation declares the bearer scheme and its 401/403 answers.
    for method, path in routes:
        if method in ("PUT", "POST", "PATCH", "DELETE"):
            op = paths[path][method.lower()]
            assert op["security"] == [{"bearer": []}]
            assert {"401", "403"} <= set(op["responses"])
    # Every $ref points at a defined schema.
    text = str(doc)
    schemas = doc["components"]["schemas"]  # type: ignore[index]
    for ref in re.findall(r"#/components/schemas/(\w+)", text):
        assert ref in schemas, ref
