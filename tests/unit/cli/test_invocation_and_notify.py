"""What the demo prints to run gslbd again, and how serve reads systemd's notify environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gslbd.cli.invocation import self_command
from gslbd.cli.sdnotify import Notifier


def test_a_gslbd_script_is_named_by_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "my env" / "bin" / "gslbd"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert self_command(str(script), "/usr/bin/python3") == f"'{script}'"  # quoted for the shell
    monkeypatch.chdir(script.parent)
    assert self_command("./gslbd", "/usr/bin/python3") == f"'{script}'"
    monkeypatch.setenv("PATH", str(script.parent))
    assert self_command("gslbd", "/usr/bin/python3") == f"'{script}'"


def test_python_dash_m_is_named_by_the_interpreter() -> None:
    main = str(Path(sys.modules["gslbd"].__file__ or "").parent / "__main__.py")
    assert self_command(main, "/usr/bin/python3") == "/usr/bin/python3 -m gslbd"
    assert self_command("", sys.executable) == f"{sys.executable} -m gslbd"


def test_notify_environment_is_read_once_and_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", "@gslbd-test")
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    notifier = Notifier.from_environment()
    assert (notifier.address, notifier.watchdog_usec, notifier.enabled) == ("@gslbd-test", 30_000_000, True)
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        assert key not in os.environ  # exec checks and workers must not speak for gslbd


def test_a_watchdog_meant_for_another_process_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))
    assert Notifier.from_environment().watchdog_usec == 0


def test_without_notify_socket_nothing_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    notifier = Notifier.from_environment()
    assert not notifier.enabled
    assert (notifier.ready("x"), notifier.reloading(), notifier.stopping()) == (False, False, False)


def test_an_unreachable_notify_socket_is_logged_once_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    notifier = Notifier(str(tmp_path / "missing.sock"))
    assert notifier.ready() is False
    assert notifier.stopping() is False
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        f"cannot notify the service manager at {tmp_path / 'missing.sock'}"
    ]
