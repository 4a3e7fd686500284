"""Fixtures that start gslbd processes for the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dns_config import CONFIG, ZONE
from gslbd_harness import Running, loopback_hosts, running_gslbd
from health_app_support import ThreadedBackend


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """gslbd serving dns_config.CONFIG on 127.0.0.1 and [::1] (when the machine has ::1)."""
    workdir: Path = tmp_path_factory.mktemp("gslbd")
    with running_gslbd(workdir, CONFIG, zone=ZONE, hosts=loopback_hosts()) as running:
        yield running


@pytest.fixture
def http_backends() -> Iterator[tuple[ThreadedBackend, ThreadedBackend]]:
    """Two real HTTP backends on 127.0.0.1 (eu, us) whose health a test can flip."""
    eu, us = ThreadedBackend(), ThreadedBackend()
    try:
        yield eu, us
    finally:
        eu.close()
        us.close()
