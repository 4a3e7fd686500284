"""Keeping the per-service endpoint gauges in step with the committed generation."""

from __future__ import annotations

from collections.abc import Iterator

from gslbd.app.generation import Generation
from gslbd.metrics import SERVICE_ENDPOINTS


class ServiceGauges:
    """gslbd_health_endpoints{_up} per configured service, from the committed generation's counts (the
    rule the answers use): the collector reads them at scrape time, so a commit costs nothing here and
    services that went away are gone from the next scrape."""

    def update(self, generation: Generation) -> None:
        counts = generation.counts

        def figures() -> Iterator[tuple[str, int, int]]:
            for name, count in counts.items():
                yield name, count.up, count.known

        SERVICE_ENDPOINTS.source = figures

    def clear(self) -> None:
        SERVICE_ENDPOINTS.source = None
