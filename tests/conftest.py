"""Shared test setup: markers, hypothesis profiles, and the gslbd process harness on sys.path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

HERE = Path(__file__).parent
# tests/integration/gslbd_harness.py starts real gslbd processes; e2e tests use it too.
sys.path.insert(0, str(HERE / "integration"))

settings.register_profile(
    "gslbd",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("ci", parent=settings.get_profile("gslbd"), derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gslbd"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    config.addinivalue_line("markers", "e2e: a whole scenario run through the CLI as a user would")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.relative_to(HERE).parts
        if parts and parts[0] == "integration":
            item.add_marker(pytest.mark.integration)
        elif parts and parts[0] == "e2e":
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.e2e)
