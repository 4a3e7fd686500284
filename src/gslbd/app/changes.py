"""What App tells the console's change log: one call per verdict, admin change, reload and peer change.

App owns one ChangeRecorder (`app.changes`) and calls it where those things happen; the API reads
`recorder.log` through `Control.changes`. Kept apart from App so the calls in app/core.py stay one
line each:

    __init__           self.changes = ChangeRecorder(self.clock)
    _on_result         changes.verdict(key, after.healthy, after.last_change_reason), for every key
                       sharing the probe, after a verdict changed
    set_admin          changes.admin(key, state, "api")
    _on_cluster_admin  changes.admin(key, state, "another instance")
    _apply_config      changes.reload_applied(config.source), after the new generation is committed
    reload_file        changes.reload_refused(path, errors), where a reload is refused
    _on_peers          changes.peers()
    change_endpoints   changes.endpoint(key, "added" | "removed" | "patched", "api"), and for another
                       instance's overlay changes "another instance"

Every call runs on App's event loop (the API's loop too), so the SSE listeners it wakes need no locks.
"""

from __future__ import annotations

from collections.abc import Sequence

from gslbd.api.changes import DEFAULT_CAPACITY, Change, ChangeKind, ChangeLog
from gslbd.clock import Clock
from gslbd.model.service import EndpointKey
from gslbd.types import AdminState


class ChangeRecorder:
    """Records into a ChangeLog with wall-clock times from `clock`."""

    def __init__(self, clock: Clock, capacity: int = DEFAULT_CAPACITY) -> None:
        self._clock = clock
        self.log = ChangeLog(capacity)

    def verdict(self, key: EndpointKey, healthy: bool | None, reason: str) -> Change:
        state = "unknown" if healthy is None else ("up" if healthy else "down")
        return self.log.record(self._clock.wall(), ChangeKind.VERDICT, state, key[0], key[1], reason)

    def admin(self, key: EndpointKey, state: AdminState, by: str) -> Change:
        return self.log.record(self._clock.wall(), ChangeKind.ADMIN, state.value, key[0], key[1], f"by {by}")

    def reload_applied(self, source: str) -> Change:
        return self.log.record(self._clock.wall(), ChangeKind.RELOAD, "applied", detail=source)

    def reload_refused(self, source: str, errors: Sequence[str]) -> Change:
        first = errors[0] if errors else ""
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        detail = f"{source}: {first}{more}" if first else source
        return self.log.record(self._clock.wall(), ChangeKind.RELOAD, "refused", detail=detail)

    def endpoint(self, key: EndpointKey, what: str, by: str) -> Change:
        return self.log.record(self._clock.wall(), ChangeKind.ENDPOINT, what, key[0], key[1], f"by {by}")

    def peers(self, detail: str = "endpoints learned from peer sites changed") -> Change:
        return self.log.record(self._clock.wall(), ChangeKind.PEERS, "changed", detail=detail)
