"""The endpoint overlay at run time: what App answers is the config file merged with the overlay
(config/overlay.py), and the API's endpoint changes are changes of the overlay (config/overlay_change.py).

    keeper = OverlayKeeper(config)          the config as read from its file (`base`), no overlay yet
    keeper.merged_with(config, overlay)     the Merged of a config (a reload's, or `base`) and an overlay
    keeper.commit(merged, base, store)      after App committed the generation of `merged`: it is in
                                            force; entries it dropped are logged and forgotten (also in
                                            the store, best effort: a reload never fails for them)
    keeper.source_of(key) / patched(key) / removed(service)   what the status shows per endpoint

App calls these from start (the stored overlay), reload, the API's changes and cluster mode's updates.
"""

from __future__ import annotations

import logging

from gslbd.config.overlay import Merged, merge
from gslbd.errors import StateError
from gslbd.model.config import Config
from gslbd.model.overlay import Overlay, OverlayEntry
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.store import StateStore

log = logging.getLogger(__name__)


def overlay_changes(before: Overlay, after: Overlay) -> dict[EndpointKey, OverlayEntry | None]:
    """The entries that differ between two overlays (None: gone in `after`)."""
    keys = set(before) | set(after)
    return {k: after.get(k) for k in sorted(keys) if before.get(k) != after.get(k)}


class OverlayKeeper:
    """The overlay in force at one App (see the module docstring)."""

    def __init__(self, base: Config) -> None:
        self.base = base
        self.entries: dict[EndpointKey, OverlayEntry] = {}
        self.merged = Merged(base)

    def merged_with(self, config: Config, overlay: Overlay | None = None) -> Merged:
        return merge(config, self.entries if overlay is None else overlay)

    def commit(self, merged: Merged, base: Config, store: StateStore) -> None:
        """`merged` (of `base`) answers now: its kept entries are the overlay; dropped ones go."""
        self.base, self.merged = base, merged
        self.entries = dict(merged.kept)
        if not merged.dropped:
            return
        for dropped in merged.dropped:
            log.warning(
                "endpoint overlay: %s",
                dropped.text(),
                extra={
                    "event": "overlay",
                    "service": dropped.key[0],
                    "endpoint": dropped.key[1],
                    "op": dropped.entry.op.value,
                    "dropped": dropped.reason,
                },
            )
        try:
            store.save_overlay(dict.fromkeys((d.key for d in merged.dropped), None))
        except StateError as exc:
            log.warning("endpoint overlay: dropped entries are still in the state store: %s", exc)

    def source_of(self, key: EndpointKey) -> str:
        return "overlay" if key in self.merged.added else "config"

    def patched(self, key: EndpointKey) -> tuple[str, ...]:
        return tuple(self.merged.patched.get(key, ()))

    def removed(self, service: str) -> tuple[Endpoint, ...]:
        return tuple(self.merged.removed.get(service, ()))
