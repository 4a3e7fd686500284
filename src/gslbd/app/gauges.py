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
        counts, count = generation.counts, generation.count
        services = generation.config.services

        def figures() -> Iterator[tuple[str, int, int]]:
            if len(counts) == len(services):
                for name, found in counts.items():
                    yield name, found.up, found.known
                return
            for service in services:  # some deferred services are not counted yet (Generation.count)
                counted = count(service.name)
                if counted is not None:
                    yield service.name, counted.up, counted.known

        SERVICE_ENDPOINTS.source = figures

    def clear(self) -> None:
        SERVICE_ENDPOINTS.source = None
