"""The services-file reader remembers lines per file: every test starts without that memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gslbd.config.service_file import forget


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    forget()
    yield
    forget()
