"""Running under systemd: the unit file passes `systemd-analyze verify`, `gslbd serve` speaks the notify
protocol to a real NOTIFY_SOCKET, and `run_as` drops root after binding, before any probe runs."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from gslbd_harness import Running, start_gslbd
from health_app_support import wait_until

ROOT = Path(__file__).parents[2]
UNIT = ROOT / "deploy" / "systemd" / "gslbd.service"
ZONE = "ops.example.com."
NOBODY = 65534


def config(check_command: str, extra: str = "") -> str:
    """A zone with one service whose endpoint is probed by an exec check running `check_command`."""
    return f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 192.0.2.53}}]
checks:
  probe:
    type: exec
    command: ["/bin/sh", "-c", {check_command!r}]
    interval: 200ms
    timeout: 150ms
    rise: 1
    fall: 1
services:
  - name: app.{ZONE}
    check: probe
    endpoints: [{{address: 192.0.2.10}}]
{extra}"""


# ---- the unit file ----------------------------------------------------------------------------------


def test_the_unit_file_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (scripts/test installs systemd)")
    gslbd = Path(sys.executable).parent / "gslbd"
    assert gslbd.is_file(), "the gslbd script is installed next to the interpreter"
    text = UNIT.read_text()
    for key in (
        "Type=notify",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "AmbientCapabilities=CAP_NET_BIND_SERVICE",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "RestrictAddressFamilies=",
        "StateDirectory=gslbd",
        "WatchdogSec=",
    ):
        assert key in text
    # verify checks that the commands exist: point them at this installation's gslbd.
    unit = tmp_path / "gslbd.service"
    unit.write_text(text.replace("/opt/gslbd/bin/gslbd", str(gslbd)))
    out = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    assert (out.returncode, out.stderr, out.stdout) == (0, "", "")
    security = subprocess.run(
        [analyze, "security", "--offline=true", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    level = re.search(r"Overall exposure level for gslbd.service: ([0-9.]+)", security.stdout)
    assert level is not None, security.stdout + security.stderr
    assert float(level.group(1)) <= 2.0  # "OK" is below 4.0; the unit scores 1.5


# ---- the notify protocol ------------------------------------------------------------------------------


class NotifyListener:
    """What a service manager sees: the datagrams sent to its NOTIFY_SOCKET, one dict per datagram, read
    by a thread all along (as systemd does: gslbd never waits for a reader)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.messages: list[dict[str, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            while data := self.sock.recv(4096):
                fields = (line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
                self.messages.append(dict(fields))

    def count(self, key: str, after: int = 0) -> int:
        return sum(key in m for m in list(self.messages)[after:])

    def states(self) -> list[str]:
        """READY, RELOADING and STOPPING in the order they came (watchdog pings left out)."""
        return [k for m in list(self.messages) for k in m if k in ("READY", "RELOADING", "STOPPING")]

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._reader.join(5)


@contextlib.contextmanager
def notify_listener(directory: Path) -> Iterator[NotifyListener]:
    listener = NotifyListener(directory / "notify.sock")
    try:
        yield listener
    finally:
        listener.close()


def test_serve_notifies_ready_reloading_stopping_and_pings_the_watchdog(tmp_path: Path) -> None:
    seen = tmp_path / "child-env"
    with notify_listener(tmp_path) as manager:
        env = {**os.environ, "NOTIFY_SOCKET": str(manager.path), "WATCHDOG_USEC": "200000"}
        command = f'echo "${{NOTIFY_SOCKET:-unset}} ${{WATCHDOG_USEC:-unset}}" > {seen}'
        server = start_gslbd(tmp_path, config(command), zone=ZONE, env=env)
        try:
            wait_until(lambda: manager.count("READY") == 1)
            ready = next(m for m in manager.messages if "READY" in m)
            assert ready["READY"] == "1"
            assert ready["MAINPID"] == str(server.proc.pid)
            assert ready["STATUS"].startswith("answering on udp://127.0.0.1:")
            assert "ANSWER: 1" in server.dig(ZONE, "SOA")
            # WATCHDOG_USEC=200ms: a ping every 100 ms.
            wait_until(lambda: manager.count("WATCHDOG") >= 3)
            assert all(m == {"WATCHDOG": "1"} for m in manager.messages if "WATCHDOG" in m)
            # Children (exec checks) do not inherit the socket: they must not speak for gslbd.
            wait_until(seen.exists)
            assert seen.read_text() == "unset unset\n"

            before = len(manager.messages)
            os.kill(server.proc.pid, signal.SIGHUP)
            wait_until(lambda: manager.count("READY", after=before) == 1)
            reloading = next(m for m in manager.messages[before:] if "RELOADING" in m)
            assert int(reloading["MONOTONIC_USEC"]) > 0
            assert manager.states() == ["READY", "RELOADING", "READY"]

            assert server.stop() == 0
            assert manager.states() == ["READY", "RELOADING", "READY", "STOPPING"]
        finally:
            server.kill()


def test_serve_without_notify_socket_runs_as_before(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    server = start_gslbd(tmp_path, config("true"), zone=ZONE, env=env)
    try:
        assert "ANSWER: 1" in server.dig(ZONE, "SOA")
        assert server.stop() == 0
        assert "service manager" not in server.log()
    finally:
        server.kill()


# ---- run_as --------------------------------------------------------------------------------------------


def _python_nobody_can_run() -> str | None:
    """An interpreter (with gslbd importable) that user nobody can read: this one, or .venv-debian's
    (pyenv's Python under /root is not readable by other users)."""
    for python in (sys.executable, str(ROOT / ".venv-debian" / "bin" / "python")):
        if not Path(python).exists():
            continue
        try:
            probe = subprocess.run(
                [python, "-c", "import gslbd.cli.main, uvloop, asyncio.subprocess"],
                user=NOBODY,
                group=NOBODY,
                extra_groups=[],
                cwd="/",
                capture_output=True,
                timeout=60,
                check=False,
            )
        except PermissionError:  # the interpreter itself is out of reach
            continue
        if probe.returncode == 0:
            return python
    return None


def _ids(pid: int) -> tuple[list[int], list[int]]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return [int(x) for x in fields["Uid"].split()], [int(x) for x in fields["Gid"].split()]


def _workers(pid: int) -> list[int]:
    """The DNS worker processes of gslbd `pid` (multiprocessing's spawned children). Its resource tracker,
    a helper that holds no socket and runs no probe, is started with the first worker and stays as it
    was (docs/deploy.md)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = dict(line.split(":", 1) for line in (entry / "status").read_text().splitlines())
                spawned = b"spawn_main" in (entry / "cmdline").read_bytes()
                if int(fields["PPid"]) == pid and spawned:
                    out.append(int(entry.name))
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_run_as_drops_root_after_binding_and_probes_run_as_that_user(tmp_path: Path, workers: int) -> None:
    if os.geteuid() != 0:
        pytest.skip("run_as needs a gslbd started as root")
    python = _python_nobody_can_run()
    if python is None:
        pytest.skip(
            "no Python that user nobody can read (scripts/test makes .venv-debian with /usr/bin/python3)"
        )
    with tempfile.TemporaryDirectory() as shared:  # writable by nobody, unlike pytest's tmp_path
        os.chmod(shared, 0o1777)
        ids = Path(shared) / "ids"
        command = f"echo $(id -u) $(id -g) > {ids}"
        text = config(command, "run_as: {user: nobody, group: nogroup}\n").replace(
            "dns: {listen: @LISTEN@, lame_duck: 0s}",
            f"dns: {{listen: @LISTEN@, lame_duck: 0s, workers: {workers}}}",
        )
        server: Running = start_gslbd(tmp_path, text, zone=ZONE, python=python)
        try:
            # The exec check ran as nobody: the drop came before the first probe.
            wait_until(ids.exists)
            assert ids.read_text() == f"{NOBODY} {NOBODY}\n"
            assert _ids(server.proc.pid) == ([NOBODY] * 4, [NOBODY] * 4)
            if workers > 1:
                wait_until(lambda: len(_workers(server.proc.pid)) >= workers)
                for child in _workers(server.proc.pid):
                    assert _ids(child) == ([NOBODY] * 4, [NOBODY] * 4)
            # DNS still answers on the sockets bound as root, and the probe's verdict reaches it.
            assert "192.0.2.10" in server.dig(f"app.{ZONE}", "A", "+short")
            assert "ANSWER: 1" in server.dig(ZONE, "SOA")
            assert "now running as nobody (uid 65534, gid 65534)" in server.log()
            assert server.stop() == 0
        finally:
            server.kill()


def test_run_as_an_unknown_user_refuses_to_start_before_binding(tmp_path: Path) -> None:
    path = tmp_path / "unknown.yaml"
    path.write_text(
        config("true", "run_as: {user: no-such-user-here}\n").replace("@LISTEN@", '["127.0.0.1:1"]')
    )
    out = subprocess.run(
        [sys.executable, "-m", "gslbd", "serve", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1
    assert "gslbd: run_as.user: no user 'no-such-user-here' on this machine" in out.stderr
    assert "cannot listen" not in out.stderr
