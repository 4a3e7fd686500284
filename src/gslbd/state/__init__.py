"""Health snapshots and admin overrides: what is up right now."""

from gslbd.state.snapshot import Snapshot, effective_up

__all__ = ["Snapshot", "effective_up"]
