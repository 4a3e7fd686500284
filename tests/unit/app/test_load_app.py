"""Load feedback through the app (docs/policies/load.md): a fetched figure steps the endpoint's load state
in the health book, rebuilds only its service, changes the answer's weights, and shows in the status API
view (load, weight drawn by, share); a figure for an endpoint a reload removed is dropped."""

from __future__ import annotations

import asyncio
import random

from gslbd.app.core import App
from gslbd.clock import FakeClock
from gslbd.config import load_config_text
from gslbd.model.service import Endpoint

CONFIG = """
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 192.0.2.53}]
services:
  - name: app
    policy: weighted
    weight_from: load
    load: {url: "http://{address}:9100/load", every: 5s}
    endpoints: [{address: 192.0.2.1}, {address: 192.0.2.2}]
  - name: other
    endpoints: [{address: 198.51.100.1}]
"""
APP = "app.gslb.example.com."


def endpoint(app: App, address: str) -> Endpoint:
    return next(e for e in app.config.services[0].endpoints if e.address == address)


def test_a_load_figure_reweighs_its_service_only_and_shows_in_the_status() -> None:
    async def scenario() -> None:
        app = App(load_config_text(CONFIG), FakeClock(), random.Random(1))
        app._on_load(endpoint(app, "192.0.2.1"), 0.75, "")
        app._on_load(endpoint(app, "192.0.2.2"), 0.25, "")
        assert app.book.pending() == frozenset({APP})  # the other service is not rebuilt
        app._rebuild()
        status = app.control.service(APP)
        assert status is not None
        by_address = {e.address: e for e in status.endpoints}
        assert (by_address["192.0.2.1"].load, by_address["192.0.2.1"].load_weight) == (0.75, 250)
        assert (by_address["192.0.2.2"].load, by_address["192.0.2.2"].load_weight) == (0.25, 750)
        assert by_address["192.0.2.1"].share == 0.25
        assert by_address["192.0.2.2"].share == 0.75
        unreachable = app.book.load((APP, "192.0.2.1"))
        app._on_load(endpoint(app, "192.0.2.1"), None, "cannot connect")  # the last good figure stays
        assert app.book.pending() == frozenset()
        after = app.book.load((APP, "192.0.2.1"))
        assert unreachable is not None and after is not None
        assert (after.used, after.failures, after.error) == (unreachable.used, 1, "cannot connect")
        other = app.control.service("other.gslb.example.com.")
        assert other is not None and other.endpoints[0].load is None

    asyncio.run(scenario())


def test_a_figure_for_an_endpoint_without_a_load_source_is_dropped() -> None:
    async def scenario() -> None:
        app = App(load_config_text(CONFIG), FakeClock(), random.Random(1))
        stray = app.config.services[1].endpoints[0]
        app._on_load(stray, 0.5, "")
        assert app.book.load(stray.key) is None

    asyncio.run(scenario())
