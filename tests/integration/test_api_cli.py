"""`gslbd status` and `gslbd admin set`, run as processes against an admin API on a free port."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "api"))

from api_support import API, APP, TOKEN, FakeControl

from gslbd.api.server import ApiServer
from gslbd.model.config import ListenAddress
from gslbd.types import AdminState


class ServerThread:
    """An ApiServer on its own event loop in a thread, so the CLI processes can call it."""

    def __init__(self, control: FakeControl, token: str | None) -> None:
        self.control = control
        self.loop = asyncio.new_event_loop()
        self.server = ApiServer(control, ListenAddress("127.0.0.1", 0), token)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def api() -> Iterator[ServerThread]:
    with ServerThread(FakeControl(), TOKEN) as running:
        yield running


def gslbd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "GSLBD_API_TOKEN"}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "gslbd", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        env=environ,
    )


def test_status_prints_a_table_of_every_endpoint_with_state_and_last_change(api: ServerThread) -> None:
    done = gslbd("status", "--api", api.server.url)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[0].split() == [
        "SERVICE",
        "ENDPOINT",
        "SITE",
        "HEALTH",
        "ADMIN",
        "EFFECTIVE",
        "SOURCE",
        "LAST",
        "CHANGE",
    ]
    assert [line.split()[:6] for line in lines[1:]] == [
        [APP, "192.0.2.1", "eu", "up", "obey", "up"],
        [APP, "2001:db8::1", "us", "down", "obey", "down"],
        [APP, "backup.example.net.", "eu", "unknown", "obey", "up"],
        [API, "198.51.100.7", "us", "unknown", "down", "down"],
    ]
    assert lines[1].endswith("2023-11-14 22:13:20Z first check: HTTP 200")
    assert lines[2].endswith("2023-11-14 22:13:31Z 3 consecutive failures: timeout after 2s")
    assert lines[3].endswith(" -")
    # Columns line up: every row has its ENDPOINT where the header has it.
    column = lines[0].index("ENDPOINT")
    assert all(line[column - 2 : column] == "  " for line in lines[1:])


def test_status_into_a_closed_pipe_ends_quietly(api: ServerThread) -> None:
    """`gslbd status | head` ended in a BrokenPipeError traceback; the reader's end is closed first here,
    so the first write fails with EPIPE."""
    read, write = os.pipe()
    os.close(read)
    environ = {k: v for k, v in os.environ.items() if k != "GSLBD_API_TOKEN"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gslbd", "status", "--api", api.server.url],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
            env=environ,
            check=False,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


def test_status_of_one_service_and_of_an_unknown_one(api: ServerThread) -> None:
    done = gslbd("status", "api.gslb.example.com", "--api", api.server.url)
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 2
    done = gslbd("status", "nope.gslb.example.com", "--api", api.server.url)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "gslbd status: 404 no service nope.gslb.example.com.\n"


def test_admin_set_with_a_token_changes_the_endpoint_and_status_shows_it(api: ServerThread) -> None:
    done = gslbd(
        "admin", "set", "app.gslb.example.com", "192.0.2.1", "down", "--api", api.server.url, "--token", TOKEN
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"{APP} 192.0.2.1: admin down (now answered: no)\n"
    assert api.control.admin == {(APP, "192.0.2.1"): AdminState.DOWN}
    status = gslbd("status", "--api", api.server.url)
    assert status.stdout.splitlines()[1].split()[:6] == [APP, "192.0.2.1", "eu", "up", "down", "down"]


def test_admin_set_reads_the_token_from_the_environment(api: ServerThread) -> None:
    done = gslbd(
        "admin", "set", APP, "2001:db8::1", "up", "--api", api.server.url, env={"GSLBD_API_TOKEN": TOKEN}
    )
    assert (done.returncode, done.stdout) == (0, f"{APP} 2001:db8::1: admin up (now answered: yes)\n")
    assert api.control.admin == {(APP, "2001:db8::1"): AdminState.UP}


def test_admin_set_without_or_with_a_wrong_token_fails_with_the_reason(api: ServerThread) -> None:
    done = gslbd("admin", "set", APP, "192.0.2.1", "down", "--api", api.server.url)
    assert done.returncode == 1
    assert done.stderr == (
        "gslbd admin set: 401 missing bearer token: send 'Authorization: Bearer <token>' "
        "(give --token or set GSLBD_API_TOKEN)\n"
    )
    done = gslbd("admin", "set", APP, "192.0.2.1", "down", "--api", api.server.url, "--token", "nope")
    assert (done.returncode, done.stderr) == (1, "gslbd admin set: 401 wrong bearer token\n")
    done = gslbd("admin", "set", APP, "192.0.2.99", "down", "--api", api.server.url, "--token", TOKEN)
    assert (done.returncode, done.stderr) == (
        1,
        f"gslbd admin set: 404 service {APP} has no endpoint 192.0.2.99\n",
    )
    assert api.control.admin == {}


def test_admin_set_rejects_an_unknown_state_before_calling_the_api(api: ServerThread) -> None:
    done = gslbd("admin", "set", APP, "192.0.2.1", "off", "--api", api.server.url, "--token", TOKEN)
    assert done.returncode == 2
    assert "invalid choice: 'off' (choose from up, down, obey)" in done.stderr.replace(
        "'up', 'down', 'obey'", "up, down, obey"
    )


def test_status_without_a_running_api_says_it_cannot_reach_it() -> None:
    with ServerThread(FakeControl(), TOKEN) as running:
        url = running.server.url
    done = gslbd("status", "--api", url)
    assert done.returncode == 1
    assert done.stderr.startswith(f"gslbd status: cannot reach the API at {url}/api/v1/services: ")
    assert "Connection refused" in done.stderr
