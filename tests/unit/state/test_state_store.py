"""State stores: admin states survive in memory or in a JSON file written atomically."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gslbd.errors import StateError
from gslbd.state.store import FileStateStore, MemoryStateStore, StateWriteError, default_state_dir
from gslbd.types import AdminState

A = ("app.gslb.example.com.", "192.0.2.1")
B = ("app.gslb.example.com.", "2001:db8::1")


def test_memory_store_keeps_what_was_saved() -> None:
    store = MemoryStateStore()
    assert store.load_admin() == {}
    store.save_admin(A, AdminState.DOWN)
    store.save_admin(A, AdminState.OBEY)
    assert store.load_admin() == {A: AdminState.OBEY}


def test_file_store_writes_json_that_a_new_store_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "state.json"
    store = FileStateStore(path)
    assert store.load_admin() == {}
    assert not path.exists()
    store.save_admin(A, AdminState.DOWN)
    store.save_admin(B, AdminState.UP)
    assert json.loads(path.read_text()) == {
        "admin": {"app.gslb.example.com.|192.0.2.1": "down", "app.gslb.example.com.|2001:db8::1": "up"}
    }
    assert FileStateStore(path).load_admin() == {A: AdminState.DOWN, B: AdminState.UP}
    assert sorted(os.listdir(path.parent)) == ["state.json"]  # no temporary file left behind


def test_a_broken_state_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("{not json")
    with pytest.raises(StateError, match=r"state file .*state.json is not JSON"):
        FileStateStore(path).load_admin()
    path.write_text('{"admin": {"app.gslb.example.com.|192.0.2.1": "sideways"}}')
    with pytest.raises(StateError) as info:
        FileStateStore(path).load_admin()
    assert str(info.value) == (
        f"state file {path}: admin entry 'app.gslb.example.com.|192.0.2.1': "
        "'sideways' is not a valid AdminState"
    )
    path.write_text('{"admin": {"no-separator": "up"}}')
    with pytest.raises(StateError, match=r"'no-separator' is not '<service>\|<address>'"):
        FileStateStore(path).load_admin()


def test_a_state_file_that_cannot_be_written_is_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = FileStateStore(blocker / "state.json")
    with pytest.raises(StateError, match=r"cannot (read|write) state file .*file/state.json"):
        store.save_admin(A, AdminState.DOWN)


def test_a_full_disk_refuses_each_write_naming_file_and_errno_logged_once_until_a_write_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.json"
    store = FileStateStore(path)
    store.save_admin(A, AdminState.DOWN)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    caplog.set_level(logging.INFO, "gslbd.state.store")
    for _ in range(3):
        with pytest.raises(StateWriteError) as refused:
            store.save_admin(B, AdminState.UP)
        assert (refused.value.path, refused.value.errno) == (path, "ENOSPC")
        assert str(refused.value) == f"cannot write state file {path}: No space left on device (ENOSPC)"
    assert [r.getMessage() for r in caplog.records] == [
        f"cannot write state file {path}: No space left on device (ENOSPC); admin changes are refused "
        "until it can be written"
    ]
    assert sorted(os.listdir(tmp_path)) == ["state.json"]  # the temporary file went with the failure
    assert FileStateStore(path).load_admin() == {A: AdminState.DOWN}  # the kept state is untouched
    monkeypatch.undo()
    store.save_admin(B, AdminState.UP)
    assert caplog.records[-1].getMessage() == f"state file {path} written again"
    assert FileStateStore(path).load_admin() == {A: AdminState.DOWN, B: AdminState.UP}


def test_stale_temporary_files_of_writers_that_no_longer_run_are_removed(tmp_path: Path) -> None:
    """kill -9 during a write leaves `.state.json.<pid>.<random>.tmp` (maybe empty); a running writer's
    (another live process) is left alone."""
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    dead_pid = int(gone.stdout)
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as live:
        stale = [
            tmp_path / f".state.json.{dead_pid}.k2j3.tmp",
            tmp_path / f".state.json.{os.getpid()}.a1b2.tmp",  # this pid: a restart as pid 1 in a container
            tmp_path / ".state.json.x8y9z0.tmp",  # no pid in the name (an older gslbd)
        ]
        stale[0].write_text('{"admin": {')
        for path in stale[1:]:
            path.write_text("")
        writing = tmp_path / f".state.json.{live.pid}.q7w8.tmp"
        writing.write_text("")
        other = tmp_path / ".other.json.x8y9z0.tmp"
        other.write_text("")
        store = FileStateStore(tmp_path / "state.json")
        assert sorted(store.remove_stale_temps()) == sorted(stale)
        live.kill()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([writing.name, other.name])


def test_default_state_dir_follows_xdg_state_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_state_dir() == tmp_path / "gslbd"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_state_dir() == tmp_path / "home" / ".local" / "state" / "gslbd"


def test_kept_verdicts_and_admin_states_share_the_file_and_neither_save_drops_the_other(
    tmp_path: Path,
) -> None:
    from gslbd.state.store import KeptVerdict

    path = tmp_path / "state.json"
    store = FileStateStore(path)
    store.load_admin()
    store.save_admin(A, AdminState.DOWN)
    store.save_verdicts({A: KeptVerdict(False, 100.25), B: KeptVerdict(True, 101.0)})
    store.save_admin(B, AdminState.OBEY)
    again = FileStateStore(path)
    assert again.load_admin() == {A: AdminState.DOWN, B: AdminState.OBEY}
    assert again.load_verdicts() == {A: KeptVerdict(False, 100.25), B: KeptVerdict(True, 101.0)}
    assert json.loads(path.read_text())["verdicts"]["app.gslb.example.com.|192.0.2.1"] == {
        "up": False,
        "checked": 100.25,
    }


def test_an_unreadable_kept_verdict_is_left_out_but_admin_states_still_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from gslbd.state.store import KeptVerdict

    path = tmp_path / "state.json"
    path.write_text(
        json.dumps(
            {
                "admin": {"app.gslb.example.com.|192.0.2.1": "down"},
                "verdicts": {
                    "app.gslb.example.com.|192.0.2.1": {"up": "yes", "checked": 1},
                    "no-separator": {"up": True, "checked": 1},
                    "app.gslb.example.com.|2001:db8::1": {"up": True, "checked": 5},
                },
            }
        )
    )
    store = FileStateStore(path)
    assert store.load_admin() == {A: AdminState.DOWN}
    assert store.load_verdicts() == {B: KeptVerdict(True, 5.0)}
    assert "verdict 'no-separator' left out" in caplog.text


def test_several_admin_states_are_saved_in_one_write_or_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    store = FileStateStore(path)
    store.save_admin(A, AdminState.UP)
    writes: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (writes.append(fd), real_fsync(fd))[1])
    store.save_admins({A: AdminState.DOWN, B: AdminState.DOWN})
    assert len(writes) == 1
    assert FileStateStore(path).load_admin() == {A: AdminState.DOWN, B: AdminState.DOWN}

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StateWriteError):
        store.save_admins({A: AdminState.OBEY, B: AdminState.UP})
    monkeypatch.undo()
    assert FileStateStore(path).load_admin() == {A: AdminState.DOWN, B: AdminState.DOWN}
    assert store.load_admin() == {A: AdminState.DOWN, B: AdminState.DOWN}
