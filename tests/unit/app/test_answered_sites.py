"""app/answered.py: the sites a failover service answers now and its failover events, from each
committed generation (read from /metrics as gslbd_service_answer_site_info and ..._failovers_total)."""

from __future__ import annotations

import asyncio
import random

from gslbd.app.answered import failover_event
from gslbd.app.core import App
from gslbd.clock import FakeClock
from gslbd.config import load_config_text
from gslbd.metrics import REGISTRY
from gslbd.types import AdminState

CONFIG = """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]
services:
  - name: fo
    policy: failover
    failover_order: [eu, us]
    check: none
    endpoints: [{address: 192.0.2.1, site: eu}, {address: 192.0.2.2, site: us}]
  - name: rr
    check: none
    endpoints: [{address: 192.0.2.3, site: eu}, {address: 192.0.2.4, site: us}]
  - name: one
    policy: failover
    check: none
    endpoints: [{address: 192.0.2.5, site: eu}, {address: 192.0.2.6, site: eu}]
"""
FO = "fo.gslb.example.com."


def _site(service: str, site: str) -> float | None:
    return REGISTRY.get_sample_value("gslbd_service_answer_site_info", {"service": service, "site": site})


def _events(direction: str) -> float:
    found = REGISTRY.get_sample_value(
        "gslbd_service_failovers_total", {"service": FO, "direction": direction}
    )
    return found or 0.0


def test_the_preferred_site_leaving_and_returning_are_two_events_and_only_a_change_counts() -> None:
    both, us = frozenset({"eu", "us"}), frozenset({"us"})
    assert failover_event("eu", frozenset({"eu"}), us) == "away"
    assert failover_event("eu", us, frozenset({"eu"})) == "back"
    assert failover_event("eu", both, frozenset({"eu"})) is None
    assert failover_event("eu", us, us) is None


def test_a_failover_service_shows_the_site_it_answers_and_counts_leaving_and_returning() -> None:
    async def scenario() -> None:
        app = App(load_config_text(CONFIG), FakeClock(), random.Random(1))
        away, back = _events("away"), _events("back")
        assert (_site(FO, "eu"), _site(FO, "us")) == (1.0, None)
        assert _site("rr.gslb.example.com.", "eu") is None  # round robin: every healthy site, not followed
        assert _site("one.gslb.example.com.", "eu") is None  # one site: nothing to fail over to
        app.book.set_admin((FO, "192.0.2.1"), AdminState.DOWN)
        app._rebuild()
        assert (_site(FO, "eu"), _site(FO, "us")) == (None, 1.0)
        assert (_events("away"), _events("back")) == (away + 1, back)
        app.book.set_admin((FO, "192.0.2.1"), AdminState.OBEY)
        app._rebuild()
        assert (_site(FO, "eu"), _site(FO, "us")) == (1.0, None)
        assert (_events("away"), _events("back")) == (away + 1, back + 1)
        app.book.set_admin((FO, "192.0.2.2"), AdminState.DOWN)  # a change that leaves eu in the answer
        app._rebuild()
        assert (_events("away"), _events("back")) == (away + 1, back + 1)

    asyncio.run(scenario())
