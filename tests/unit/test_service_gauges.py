"""The per-service endpoint gauges are read from the committed generation at scrape time."""

from __future__ import annotations

import random
from dataclasses import replace

from gslbd.app.gauges import ServiceGauges
from gslbd.app.generation import GenerationBuilder, NewSnapshot, resolve
from gslbd.config import load_config_text
from gslbd.metrics import REGISTRY
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
    return REGISTRY.get_sample_value(name, {"service": service})


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
