"""The per-service endpoint gauges are read from the committed generation at scrape time, and /metrics
writes them as prometheus_client would, keeping each service's lines until its figures change."""

from __future__ import annotations

import random
from dataclasses import replace

from prometheus_client import generate_latest

from gslbd.app.gauges import ServiceGauges
from gslbd.app.generation import GenerationBuilder, NewSnapshot, resolve
from gslbd.config import load_config_text
from gslbd.metrics import SERVICE_ENDPOINTS, SERVICE_REGISTRY
from gslbd.state.book import HealthBook
from gslbd.state.status import EndpointStatus

CONFIG = """\
site: {name: eu}
dns: {listen: ["127.0.0.1:5353"]}
zones: [{origin: gslb.test., nameservers: [{name: ns1.gslb.test., address: 127.0.0.1}]}]
services:
  - {name: app, check: none, endpoints: [{address: 192.0.2.1}, {address: 192.0.2.2}]}
  - {name: web, check: none, endpoints: [{address: 192.0.2.3}]}
"""


def sample(name: str, service: str) -> float | None:
    return SERVICE_REGISTRY.get_sample_value(name, {"service": service})


def test_gauges_follow_the_committed_generation_and_forget_services_that_went_away() -> None:
    config = load_config_text(CONFIG)
    book = HealthBook()
    builder = GenerationBuilder()
    first = builder.first(resolve(config, random.Random(1)), book.snapshot())
    gauges = ServiceGauges()
    gauges.update(first)
    assert sample("gslbd_health_endpoints_up", "app.gslb.test.") == 2
    assert sample("gslbd_health_endpoints", "web.gslb.test.") == 1

    book.record(("app.gslb.test.", "192.0.2.1"), EndpointStatus(healthy=False))
    after = builder.next(first, NewSnapshot(book.snapshot(), book.take_touched()))
    assert sample("gslbd_health_endpoints_up", "app.gslb.test.") == 2  # not committed yet
    gauges.update(after)
    assert sample("gslbd_health_endpoints_up", "app.gslb.test.") == 1

    fewer = replace(config, services=config.services[:1])
    gauges.update(GenerationBuilder().first(resolve(fewer, random.Random(1)), book.snapshot()))
    assert sample("gslbd_health_endpoints", "web.gslb.test.") is None
    gauges.clear()
    assert sample("gslbd_health_endpoints", "app.gslb.test.") is None


def test_the_kept_lines_are_what_prometheus_client_writes_through_changes_and_removals() -> None:
    rng = random.Random(7)
    names = [f"s{i}.gslb.test." for i in range(50)] + ['odd\\"name\n.gslb.test.']
    figures = {name: (rng.randint(0, 3), 4) for name in names}
    SERVICE_ENDPOINTS.source = lambda: ((n, up, known) for n, (up, known) in figures.items())
    try:
        for _ in range(20):
            assert SERVICE_ENDPOINTS.text() == generate_latest(SERVICE_REGISTRY)
            for name in rng.sample(sorted(figures), 5):  # some figures change, services come and go
                figures[name] = (rng.randint(0, 4), rng.randint(4, 5))
            figures.pop(rng.choice(sorted(figures)))
            figures[f"new{rng.randint(0, 10**6)}.gslb.test."] = (1, 1)
        SERVICE_ENDPOINTS.source = None
        assert SERVICE_ENDPOINTS.text() == generate_latest(SERVICE_REGISTRY)
    finally:
        SERVICE_ENDPOINTS.source = None
