"""The endpoint overlay in the state file: its own "endpoints" section, written with the admin states and
the verdicts (no save drops another's part), and an entry that cannot be read is a located StateError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gslbd.errors import StateError
from gslbd.model.overlay import OverlayEntry, OverlayOp
from gslbd.state.store import FileStateStore, KeptVerdict, MemoryStateStore
from gslbd.types import AdminState

A = ("app.gslb.example.com.", "192.0.2.1")
B = ("app.gslb.example.com.", "203.0.113.7")
ADD = OverlayEntry(OverlayOp.ADD, {"address": "203.0.113.7", "site": "us"})


def test_the_overlay_is_saved_in_its_section_and_read_back_by_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    store = FileStateStore(path)
    store.load_admin()
    store.save_overlay({B: ADD, A: OverlayEntry(OverlayOp.PATCH, {"weight": 5})})
    store.save_admin(A, AdminState.DOWN)
    store.save_verdicts({A: KeptVerdict(True, 1.5)})
    assert json.loads(path.read_text()) == {
        "admin": {"app.gslb.example.com.|192.0.2.1": "down"},
        "verdicts": {"app.gslb.example.com.|192.0.2.1": {"up": True, "checked": 1.5}},
        "endpoints": {
            "app.gslb.example.com.|192.0.2.1": {"op": "patch", "set": {"weight": 5}},
            "app.gslb.example.com.|203.0.113.7": {
                "op": "add",
                "endpoint": {"address": "203.0.113.7", "site": "us"},
            },
        },
    }
    again = FileStateStore(path)
    assert again.load_admin() == {A: AdminState.DOWN}
    assert again.load_overlay() == {B: ADD, A: OverlayEntry(OverlayOp.PATCH, {"weight": 5})}
    again.save_overlay({A: None, B: None})  # None: the entry is gone
    assert "endpoints" not in json.loads(path.read_text())
    assert FileStateStore(path).load_admin() == {A: AdminState.DOWN}


def test_the_memory_store_keeps_the_overlay_too() -> None:
    store = MemoryStateStore()
    store.save_overlay({B: ADD})
    assert store.load_overlay() == {B: ADD}
    store.save_overlay({B: None})
    assert store.load_overlay() == {}


@pytest.mark.parametrize(
    ("endpoints", "message"),
    [
        ([], 'expected "endpoints": {"<service>|<address>": {"op": ...}}'),
        ({"nobar": {"op": "remove"}}, "endpoints entry 'nobar': 'nobar' is not '<service>|<address>'"),
        ({"a.|192.0.2.1": {"op": "move"}}, "endpoints entry 'a.|192.0.2.1': unknown op 'move'"),
    ],
)
def test_an_overlay_entry_that_cannot_be_read_is_an_error_naming_file_and_entry(
    tmp_path: Path, endpoints: object, message: str
) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"admin": {}, "endpoints": endpoints}))
    with pytest.raises(StateError) as caught:
        FileStateStore(path).load_admin()
    assert str(caught.value).startswith(f"state file {path}: {message}")
