"""Fixtures of the wire tests: the served world of wire_support, compiled into a fresh Responder."""

from __future__ import annotations

import pytest
from wire_support import make_responder, make_view

from gslbd.answer import View
from gslbd.wire import Responder


@pytest.fixture(scope="module")
def view() -> View:
    return make_view()


@pytest.fixture
def responder(view: View) -> Responder:
    """A responder with fresh query counters (max_udp_payload 1232, use_client_subnet on)."""
    return make_responder(view)
