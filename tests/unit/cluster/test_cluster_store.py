"""Admin states in cluster mode: Redis's states over the local ones, local changes queued for Redis."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from gslbd.cluster.store import RedisStateStore
from gslbd.errors import StateError
from gslbd.model.overlay import OverlayEntry, OverlayOp
from gslbd.state.store import FileStateStore, MemoryStateStore
from gslbd.types import AdminState

A = ("app.gslb.example.com.", "192.0.2.10")
B = ("app.gslb.example.com.", "192.0.2.11")


def test_a_save_is_kept_locally_and_queued_for_redis(tmp_path: Path) -> None:
    local = FileStateStore(tmp_path / "state.json")
    wakes: list[int] = []
    store = RedisStateStore(local, lambda: wakes.append(1))
    store.save_admin(A, AdminState.DOWN)
    assert store.load_admin() == {A: AdminState.DOWN}
    assert FileStateStore(tmp_path / "state.json").load_admin() == {A: AdminState.DOWN}
    assert store.pending() == {A: AdminState.DOWN}
    assert wakes == [1]
    store.flushed({A: AdminState.DOWN})
    assert store.pending() == {}


def test_a_change_made_while_a_write_was_in_flight_stays_pending() -> None:
    store = RedisStateStore(MemoryStateStore())
    store.save_admin(A, AdminState.DOWN)
    written = store.pending()
    store.save_admin(A, AdminState.UP)
    store.flushed(written)
    assert store.pending() == {A: AdminState.UP}


def test_redis_states_replace_local_ones_except_over_pending_changes() -> None:
    local = MemoryStateStore()
    local.save_admin(A, AdminState.UP)
    store = RedisStateStore(local)
    assert store.load_admin() == {A: AdminState.UP}
    store.save_admin(B, AdminState.DOWN)
    changed = store.merge_remote({A: AdminState.DOWN, B: AdminState.UP})
    assert changed == {A: AdminState.DOWN}
    assert store.load_admin() == {A: AdminState.DOWN, B: AdminState.DOWN}
    assert local.load_admin() == {A: AdminState.DOWN, B: AdminState.DOWN}


def test_a_remote_state_is_news_only_once() -> None:
    store = RedisStateStore(MemoryStateStore())
    assert store.apply_remote(A, AdminState.DOWN) is True
    assert store.apply_remote(A, AdminState.DOWN) is False
    assert store.load_admin() == {A: AdminState.DOWN}


class FullDisk(MemoryStateStore):
    """A local store that can be read but not written (a full disk)."""

    def save_admins(self, changes: Mapping[tuple[str, str], AdminState]) -> None:
        raise StateError("cannot write state file /var/lib/gslbd/state.json: No space left on device")


def test_a_local_store_that_cannot_save_refuses_the_change_and_queues_nothing() -> None:
    store = RedisStateStore(FullDisk())
    with pytest.raises(StateError, match="No space left on device"):
        store.save_admin(A, AdminState.DOWN)
    assert store.pending() == {}
    assert store.load_admin() == {}
    # A state from another instance is still applied (only its local copy is lost).
    assert store.apply_remote(B, AdminState.UP) is True
    assert store.load_admin() == {B: AdminState.UP}


def test_a_bulk_save_is_one_local_write_and_every_change_is_queued(tmp_path: Path) -> None:
    wakes: list[int] = []
    store = RedisStateStore(FileStateStore(tmp_path / "state.json"), lambda: wakes.append(1))
    store.save_admins({A: AdminState.DOWN, B: AdminState.DOWN})
    assert store.pending() == {A: AdminState.DOWN, B: AdminState.DOWN}
    assert FileStateStore(tmp_path / "state.json").load_admin() == {A: AdminState.DOWN, B: AdminState.DOWN}
    assert wakes == [1]
    with pytest.raises(StateError):
        RedisStateStore(FullDisk()).save_admins({A: AdminState.DOWN, B: AdminState.UP})


def test_overlay_changes_are_kept_locally_queued_and_redis_wins_except_over_pending_ones() -> None:
    remove, patch = OverlayEntry(OverlayOp.REMOVE), OverlayEntry(OverlayOp.PATCH, {"weight": 3})
    local = MemoryStateStore()
    wakes: list[int] = []
    store = RedisStateStore(local, lambda: wakes.append(1))
    store.save_overlay({A: remove})
    assert (local.load_overlay(), store.overlay_pending(), wakes) == ({A: remove}, {A: remove}, [1])
    # Redis has B patched and not A (yet): A stays, pending; B arrives
    assert store.merge_remote_overlay({B: patch}) == {B: patch}
    assert store.load_overlay() == {A: remove, B: patch} == local.load_overlay()
    store.overlay_flushed({A: remove})
    assert store.overlay_pending() == {}
    # a deletion at another instance: news once, kept locally
    assert store.apply_remote_overlay(B, None) is True
    assert store.apply_remote_overlay(B, None) is False
    assert local.load_overlay() == {A: remove}
    # Redis without A, nothing pending: A goes
    assert store.merge_remote_overlay({}) == {A: None}
    assert store.load_overlay() == {}
