"""Admin states in cluster mode: a `state.store.StateStore` whose truth is the Redis hash <prefix>admin.

The App uses it like any store (load_admin at start, save_admin on a change). Every state is also
kept in the local store (`state.file`, or memory), so an instance that restarts while Redis is down
still has the last states it knew. A change saved here is queued; the cluster node writes it to Redis
(HSET + PUBLISH on <prefix>admin:updates) at once, or after the reconnect when Redis is down.
States that other instances set arrive through `merge_remote` / `apply_remote`. The endpoint overlay
(model/overlay.py) is kept the same way: locally, queued for the Redis hash <prefix>endpoints
(cluster/overlay.py writes it), and taken from Redis by `merge_remote_overlay` / `apply_remote_overlay`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from gslbd.errors import StateError
from gslbd.model.overlay import OverlayEntry
from gslbd.model.service import EndpointKey
from gslbd.state.store import StateStore, with_changes
from gslbd.types import AdminState

log = logging.getLogger(__name__)


class RedisStateStore:
    """StateStore of cluster mode (see the module docstring). `on_change` is called after a save."""

    def __init__(self, local: StateStore, on_change: Callable[[], None] | None = None) -> None:
        self.local = local
        self._on_change = on_change
        self._admin: dict[EndpointKey, AdminState] | None = None
        self._pending: dict[EndpointKey, AdminState] = {}
        self._overlay: dict[EndpointKey, OverlayEntry] | None = None
        self._overlay_pending: dict[EndpointKey, OverlayEntry | None] = {}

    def load_admin(self) -> dict[EndpointKey, AdminState]:
        """The states known now: the local store's, updated by what Redis holds."""
        return dict(self._known())

    def save_admin(self, key: EndpointKey, state: AdminState) -> None:
        """Keep a change locally (StateError when that fails: then nothing is queued) and queue it."""
        self.save_admins({key: state})

    def save_admins(self, changes: Mapping[EndpointKey, AdminState]) -> None:
        """Keep several locally in one write (StateError: none kept, none queued) and queue them all."""
        known = self._known()
        self.local.save_admins(changes)
        known.update(changes)
        self._pending.update(changes)
        if self._on_change is not None:
            self._on_change()

    def load_overlay(self) -> dict[EndpointKey, OverlayEntry]:
        """The endpoint overlay known now: the local store's, updated by what Redis holds."""
        return dict(self._known_overlay())

    def save_overlay(self, changes: Mapping[EndpointKey, OverlayEntry | None]) -> None:
        """Keep overlay changes locally (StateError: none kept, none queued) and queue them."""
        known = self._known_overlay()
        self.local.save_overlay(changes)
        self._overlay = with_changes(known, changes)
        self._overlay_pending.update(changes)
        if self._on_change is not None:
            self._on_change()

    # -- what the cluster node uses ------------------------------------------------------------------

    def overlay_pending(self) -> dict[EndpointKey, OverlayEntry | None]:
        """Overlay changes made here that Redis does not have yet."""
        return dict(self._overlay_pending)

    def overlay_flushed(self, written: Mapping[EndpointKey, OverlayEntry | None]) -> None:
        for key, entry in written.items():
            if key in self._overlay_pending and self._overlay_pending[key] == entry:
                del self._overlay_pending[key]

    def merge_remote_overlay(
        self, remote: Mapping[EndpointKey, OverlayEntry]
    ) -> dict[EndpointKey, OverlayEntry | None]:
        """Redis's overlay is the truth (except over changes pending here): the changes it makes here."""
        known = self._known_overlay()
        changes: dict[EndpointKey, OverlayEntry | None] = {
            key: remote.get(key)
            for key in sorted(set(known) | set(remote))
            if key not in self._overlay_pending and known.get(key) != remote.get(key)
        }
        if changes:
            self._keep_overlay(changes)
        return changes

    def apply_remote_overlay(self, key: EndpointKey, entry: OverlayEntry | None) -> bool:
        """Another instance changed an overlay entry: keep it (locally too); True when it is news."""
        if self._known_overlay().get(key) == entry:
            return False
        self._keep_overlay({key: entry})
        return True

    def _keep_overlay(self, changes: Mapping[EndpointKey, OverlayEntry | None]) -> None:
        self._overlay = with_changes(self._known_overlay(), changes)
        try:
            self.local.save_overlay(changes)
        except StateError as exc:
            log.warning("cluster: endpoint overlay not kept locally: %s", exc)

    def _known_overlay(self) -> dict[EndpointKey, OverlayEntry]:
        if self._overlay is None:
            self._known()  # the local store is read (a state file by load_admin)
            self._overlay = self.local.load_overlay()
        return self._overlay

    def pending(self) -> dict[EndpointKey, AdminState]:
        """Changes made here that Redis does not have yet."""
        return dict(self._pending)

    def flushed(self, written: Mapping[EndpointKey, AdminState]) -> None:
        """These were written to Redis (unless changed again since)."""
        for key, state in written.items():
            if self._pending.get(key) is state:
                del self._pending[key]

    def merge_remote(self, remote: Mapping[EndpointKey, AdminState]) -> dict[EndpointKey, AdminState]:
        """Take Redis's states (except over changes still pending here); the ones that changed."""
        changed = {}
        for key, state in remote.items():
            if key not in self._pending and self.apply_remote(key, state):
                changed[key] = state
        return changed

    def apply_remote(self, key: EndpointKey, state: AdminState) -> bool:
        """Another instance set a state: keep it (locally too); True when it is news here."""
        known = self._known()
        if known.get(key) is state:
            return False
        known[key] = state
        try:
            self.local.save_admin(key, state)
        except StateError as exc:
            log.warning("cluster: admin state of %s %s not kept locally: %s", key[0], key[1], exc)
        return True

    def _known(self) -> dict[EndpointKey, AdminState]:
        if self._admin is None:
            self._admin = self.local.load_admin()
        return self._admin
