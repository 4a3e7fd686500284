"""Where run-time admin states are kept so that they survive a restart.

    StateStore          the protocol: load_admin() and save_admin(key, state); load_overlay() and
                        save_overlay(changes) for the endpoint overlay (model/overlay.py)
    MemoryStateStore    in this process only (the embedded default without `state.file`)
    FileStateStore      a JSON file, rewritten atomically (temporary file, fsync, rename):
                        {"admin": {"<service>|<address>": "down", ...},
                         "verdicts": {"<service>|<address>": {"up": false, "checked": 1764650000.5}, ...},
                         "endpoints": {"<service>|<address>": {"op": "add", "endpoint": {...}}, ...}}

"endpoints" is the endpoint overlay: endpoints added, removed ({"op": "remove"}) or patched
({"op": "patch", "set": {"weight": 5}}) through the API, on top of the config file (config/overlay.py).

The verdicts are this node's last health verdicts with the time of the result that last confirmed
each (`save_verdicts`, written in batches: app/verdicts.py); a restart starts from the recent ones.

An explicit `obey` is stored like `up` and `down`: it overrides the config's `admin:` of the endpoint.
Errors are `StateError` with a message that names the file; a write that fails is a `StateWriteError`
with the file and the errno name (the API answers it 503), logged once until a write succeeds again.
A write cut short (kill -9, power loss) can leave its temporary file `.<name>.<pid>.<random>.tmp`
beside the state file: `remove_stale_temps` (called when a server opens its store) removes those of
writers that no longer run.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gslbd.errors import StateError
from gslbd.model.overlay import OverlayEntry, entry_json, entry_of
from gslbd.model.service import EndpointKey
from gslbd.types import AdminState

log = logging.getLogger(__name__)

SEPARATOR = "|"


@dataclass(frozen=True, slots=True)
class KeptVerdict:
    """A verdict as stored: up or down, and the wall time of the result that last confirmed it."""

    up: bool
    checked: float


class StateStore(Protocol):
    """Persistent run-time admin states, by endpoint key (service fqdn, address)."""

    def load_admin(self) -> dict[EndpointKey, AdminState]:
        """Every stored admin state. Raises StateError when the store cannot be read."""
        ...

    def save_admin(self, key: EndpointKey, state: AdminState) -> None:
        """Store one endpoint's admin state. Raises StateError when it cannot be kept."""
        ...

    def save_admins(self, changes: Mapping[EndpointKey, AdminState]) -> None:
        """Store several at once (a bulk change): all of them or, with StateError, none."""
        ...

    def load_overlay(self) -> dict[EndpointKey, OverlayEntry]:
        """The endpoint overlay (after load_admin, which reads the store). StateError as load_admin."""
        ...

    def save_overlay(self, changes: Mapping[EndpointKey, OverlayEntry | None]) -> None:
        """Store overlay entries (None: the entry is gone) in one write, or with StateError none."""
        ...


class MemoryStateStore:
    """Admin states kept in memory: they last as long as the process."""

    def __init__(self) -> None:
        self._admin: dict[EndpointKey, AdminState] = {}
        self._overlay: dict[EndpointKey, OverlayEntry] = {}

    def load_admin(self) -> dict[EndpointKey, AdminState]:
        return dict(self._admin)

    def save_admin(self, key: EndpointKey, state: AdminState) -> None:
        self.save_admins({key: state})

    def save_admins(self, changes: Mapping[EndpointKey, AdminState]) -> None:
        self._admin.update(changes)

    def load_overlay(self) -> dict[EndpointKey, OverlayEntry]:
        return dict(self._overlay)

    def save_overlay(self, changes: Mapping[EndpointKey, OverlayEntry | None]) -> None:
        self._overlay = with_changes(self._overlay, changes)


def with_changes(
    overlay: Mapping[EndpointKey, OverlayEntry], changes: Mapping[EndpointKey, OverlayEntry | None]
) -> dict[EndpointKey, OverlayEntry]:
    """`overlay` with `changes` applied (None removes the key)."""
    out = dict(overlay)
    for key, entry in changes.items():
        if entry is None:
            out.pop(key, None)
        else:
            out[key] = entry
    return out


class StateWriteError(StateError):
    """The state file could not be written: `path` and `errno` (a name like "EACCES") say which and why."""

    def __init__(self, message: str, path: Path, errno_name: str) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno_name


def encode_key(key: EndpointKey) -> str:
    return f"{key[0]}{SEPARATOR}{key[1]}"


def decode_key(text: str) -> EndpointKey:
    service, sep, address = text.partition(SEPARATOR)
    if not sep or not service or not address:
        raise ValueError(f"{text!r} is not '<service>|<address>'")
    return service, address


class FileStateStore:
    """Admin states and kept verdicts in a JSON file. A missing file is an empty store; it is created
    on the first save. Saves may come from a thread (the verdicts' batches): one lock orders them, and
    each writes the newest of both parts."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._admin: dict[EndpointKey, AdminState] | None = None
        self._verdicts: dict[EndpointKey, KeptVerdict] = {}
        self._overlay: dict[EndpointKey, OverlayEntry] = {}
        self._lock = threading.Lock()
        self._failing: str | None = None  # the message of the last failed write, until one succeeds

    def load_admin(self) -> dict[EndpointKey, AdminState]:
        """Read the file (again). StateError when it exists but cannot be read or is not a state file."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self._admin = {}
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise StateError(f"cannot read state file {self.path}: {_why(exc)}") from exc
        self._admin, self._verdicts, self._overlay = _parse(text, self.path)
        return dict(self._admin)

    def load_verdicts(self) -> dict[EndpointKey, KeptVerdict]:
        """The verdicts kept by the last run (read with `load_admin`, which must come first)."""
        return dict(self._verdicts)

    def load_overlay(self) -> dict[EndpointKey, OverlayEntry]:
        """The endpoint overlay kept by the last run (read with `load_admin`, which must come first)."""
        return dict(self._overlay)

    def save_admin(self, key: EndpointKey, state: AdminState) -> None:
        self.save_admins({key: state})

    def save_admins(self, changes: Mapping[EndpointKey, AdminState]) -> None:
        """One write of the file with every change (StateWriteError: the file and memory as before)."""
        with self._lock:
            admin = dict(self._admin) if self._admin is not None else self.load_admin()
            admin.update(changes)
            self._write(self._text(admin, self._verdicts, self._overlay))
            self._admin = admin

    def save_overlay(self, changes: Mapping[EndpointKey, OverlayEntry | None]) -> None:
        """One write of the file with the overlay changed (StateWriteError: file and memory as before)."""
        with self._lock:
            admin = dict(self._admin) if self._admin is not None else self.load_admin()
            overlay = with_changes(self._overlay, changes)
            self._write(self._text(admin, self._verdicts, overlay))
            self._admin, self._overlay = admin, overlay

    def save_verdicts(self, verdicts: Mapping[EndpointKey, KeptVerdict]) -> None:
        """Replace the kept verdicts (every endpoint's latest; the admin states stay as they are)."""
        with self._lock:
            admin = dict(self._admin) if self._admin is not None else self.load_admin()
            kept = dict(verdicts)
            self._write(self._text(admin, kept, self._overlay))
            self._admin, self._verdicts = admin, kept

    @staticmethod
    def _text(
        admin: Mapping[EndpointKey, AdminState],
        verdicts: Mapping[EndpointKey, KeptVerdict],
        overlay: Mapping[EndpointKey, OverlayEntry],
    ) -> str:
        data: dict[str, object] = {"admin": {encode_key(k): v.value for k, v in sorted(admin.items())}}
        if verdicts:
            data["verdicts"] = {
                encode_key(k): {"up": v.up, "checked": round(v.checked, 3)}
                for k, v in sorted(verdicts.items())
            }
        if overlay:
            data["endpoints"] = {encode_key(k): entry_json(v) for k, v in sorted(overlay.items())}
        return json.dumps(data, indent=2) + "\n"

    def _write(self, text: str) -> None:
        try:
            self._replace(text)
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, "EIO")
            message = f"cannot write state file {self.path}: {_why(exc)} ({name})"
            if message != self._failing:  # once, not per request: the caller answers every one
                log.error("%s; admin changes are refused until it can be written", message)
                self._failing = message
            raise StateWriteError(message, self.path, name) from exc
        if self._failing is not None:
            log.info("state file %s written again", self.path)
            self._failing = None

    def _replace(self, text: str) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f"{self._temp_prefix}{os.getpid()}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @property
    def _temp_prefix(self) -> str:
        return f".{self.path.name}."

    def remove_stale_temps(self) -> list[Path]:
        """Remove the temporary files of writes cut short (`.<name>.*.tmp` beside the file) whose writer
        is not running: its pid is gone, is this process's (a restart in a container, where gslbd is
        pid 1 every time) or is not in the name. The paths removed; what cannot be removed is logged."""
        removed: list[Path] = []
        try:
            candidates = sorted(self.path.parent.glob(f"{self._temp_prefix}*.tmp"))
        except OSError:
            return removed
        for path in candidates:
            if _writer_running(path.name[len(self._temp_prefix) :]):
                continue
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("cannot remove stale temporary state file %s: %s", path, _why(exc))
                continue
            removed.append(path)
        if removed:
            names = ", ".join(p.name for p in removed)
            log.info("removed %d stale temporary state file(s) beside %s: %s", len(removed), self.path, names)
        return removed


def _writer_running(rest: str) -> bool:
    """Whether the process that made a temporary file named `<pid>.<random>.tmp` (after the prefix)
    still runs (and is not this one)."""
    pid_text = rest.partition(".")[0]
    if not pid_text.isdigit() or int(pid_text) in (0, os.getpid()):
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it runs, as another user
        return True
    return True


def _why(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


_Parsed = tuple[
    dict[EndpointKey, AdminState], dict[EndpointKey, KeptVerdict], dict[EndpointKey, OverlayEntry]
]


def _parse(text: str, path: Path) -> _Parsed:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StateError(f"state file {path} is not JSON: {exc}") from exc
    admin = data.get("admin", {}) if isinstance(data, dict) else None
    if not isinstance(admin, dict):
        raise StateError(f'state file {path}: expected {{"admin": {{"<service>|<address>": "<state>"}}}}')
    out: dict[EndpointKey, AdminState] = {}
    for name, value in admin.items():
        try:
            out[decode_key(name)] = AdminState(value)
        except ValueError as exc:
            raise StateError(f"state file {path}: admin entry {name!r}: {exc}") from exc
    return out, _verdicts(data.get("verdicts", {}), path), _overlay(data.get("endpoints", {}), path)


def _overlay(found: object, path: Path) -> dict[EndpointKey, OverlayEntry]:
    """The endpoint overlay; an entry that cannot be read is a StateError (like an admin state, an
    endpoint added or removed by an operator is never dropped silently)."""
    if not isinstance(found, dict):
        raise StateError(f'state file {path}: expected "endpoints": {{"<service>|<address>": {{"op": ...}}}}')
    out: dict[EndpointKey, OverlayEntry] = {}
    for name, value in found.items():
        try:
            out[decode_key(name)] = entry_of(value)
        except ValueError as exc:
            raise StateError(f"state file {path}: endpoints entry {name!r}: {exc}") from exc
    return out


def _verdicts(found: object, path: Path) -> dict[EndpointKey, KeptVerdict]:
    """The kept verdicts; one that cannot be read is left out with a warning (they only bridge the
    time to the first probes, unlike admin states, which must never be dropped silently)."""
    out: dict[EndpointKey, KeptVerdict] = {}
    if not isinstance(found, dict):
        log.warning("state file %s: 'verdicts' is not a mapping; starting without kept verdicts", path)
        return out
    for name, value in found.items():
        try:
            key = decode_key(name)
            up, checked = value["up"], value["checked"]
            if not isinstance(up, bool) or not isinstance(checked, int | float):
                raise ValueError("expected {'up': true|false, 'checked': <unix time>}")
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("state file %s: verdict %r left out: %s", path, name, exc)
            continue
        out[key] = KeptVerdict(up, float(checked))
    return out


def default_state_dir() -> Path:
    """Where commands without a config keep their state: $XDG_STATE_HOME/gslbd, else
    ~/.local/state/gslbd (not created here)."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "gslbd"
