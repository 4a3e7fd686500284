"""Health snapshots, the health book, admin overrides and the stores that keep them."""

from gslbd.state.book import HealthBook
from gslbd.state.snapshot import Snapshot, effective_up
from gslbd.state.store import FileStateStore, MemoryStateStore, StateStore

__all__ = ["FileStateStore", "HealthBook", "MemoryStateStore", "Snapshot", "StateStore", "effective_up"]
