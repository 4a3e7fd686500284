"""Keeping the per-service endpoint gauges in step with the committed generation."""

from __future__ import annotations

from collections.abc import Iterable

from gslbd.app.generation import Generation, ServiceCount
from gslbd.metrics import ENDPOINTS, ENDPOINTS_UP


class ServiceGauges:
    """Sets gslbd_health_endpoints{_up} per configured service from the generation's counts (the rule
    the answers use); drops services that went away. After a snapshot change only the services the
    generation says changed are looked at: setting a labelled gauge costs a lock and a lookup."""

    def __init__(self) -> None:
        self._labelled: dict[str, tuple[int, int]] = {}  # service -> (up, known) last set

    def update(self, generation: Generation) -> None:
        counts = generation.counts
        if generation.changed is None:
            names: dict[str, tuple[int, int]] = {}
            items: Iterable[tuple[str, ServiceCount]] = counts.items()
        else:
            names = self._labelled
            items = ((n, counts[n]) for n in generation.changed if n in counts)
        for name, count in items:
            figures = (count.up, count.known)
            if self._labelled.get(name) != figures:
                ENDPOINTS_UP.labels(service=name).set(count.up)
                ENDPOINTS.labels(service=name).set(count.known)
            names[name] = figures
        if generation.changed is None:
            for gone in self._labelled.keys() - names.keys():
                ENDPOINTS_UP.remove(gone)
                ENDPOINTS.remove(gone)
            self._labelled = names

    def clear(self) -> None:
        for name in self._labelled:
            ENDPOINTS_UP.remove(name)
            ENDPOINTS.remove(name)
        self._labelled = {}
