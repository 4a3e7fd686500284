"""`gslbd check` loads only what it needs: no server, event loop, HTTP or Redis client (their imports
cost a second of a 3-second check at 100,000 services), and the command line loads the module of the
command that runs, not every command's."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import gslbd.app
import gslbd.app.core
import gslbd.app.usable
from gslbd.cli.main import build_parser

# What `gslbd check` must not load: the server and its clients.
HEAVY = (
    "asyncio",
    "aiohttp",
    "redis",
    "redis.asyncio",
    "prometheus_client",
    "gslbd.app.core",
    "gslbd.server",
    "gslbd.api",
    "gslbd.wire",
    "gslbd.cluster",
    "gslbd.health",
    "gslbd.exchange",
    "gslbd.explain",
)


def _loaded_after(argv: list[str]) -> tuple[int, set[str]]:
    """(the exit code, the modules loaded) after `gslbd <argv>` runs in a fresh interpreter."""
    code = (
        "import json, sys\n"
        "from gslbd.cli.main import main\n"
        f"code = main({argv!r})\n"
        "print(json.dumps([code, sorted(sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    found = json.loads(done.stdout.splitlines()[-1])
    return found[0], set(found[1])


def test_gslbd_check_loads_no_server_event_loop_http_or_redis_module() -> None:
    example = str(resources.files("gslbd") / "examples" / "example.yaml")  # no cluster: no Redis URL
    code, loaded = _loaded_after(["check", "--config", example])
    assert code == 0
    assert "gslbd.app.usable" in loaded  # the GeoIP and Redis URL checks did run
    assert sorted(loaded & set(HEAVY)) == []


def test_gslbd_explain_still_loads_the_app_it_needs() -> None:
    example = str(resources.files("gslbd") / "examples" / "example.yaml")
    argv = ["explain", "app.gslb.example.com", "--client", "10.1.2.3", "--config", example]
    code, loaded = _loaded_after(argv)
    assert code == 0
    assert {"gslbd.app.core", "gslbd.explain"} <= loaded


def test_the_checks_beyond_validation_are_the_same_function_everywhere() -> None:
    assert gslbd.app.unusable is gslbd.app.core.unusable is gslbd.app.usable.unusable
    assert gslbd.app.App is gslbd.app.core.App
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = gslbd.app.Nothing  # type: ignore[attr-defined]


def _commands(only: str | None) -> set[str]:
    parser = build_parser(only)
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def test_the_whole_command_line_lists_every_command_and_one_command_loads_its_own() -> None:
    every = _commands(None)
    assert every >= {"serve", "check", "explain", "demo", "status", "admin", "doctor", "delegation", "dnssec"}
    assert _commands("check") == {"serve", "check", "explain", "version"}
    assert _commands("status") == {"serve", "check", "explain", "version", "status", "admin"}


def test_gslbd_check_as_a_process_says_everything_before_it_leaves(tmp_path: Path) -> None:
    """The command ends its process without the interpreter's teardown: what it printed into a pipe
    (block-buffered) must still arrive, with the exit code."""
    example = resources.files("gslbd") / "examples" / "example.yaml"
    good = tmp_path / "good.yaml"
    good.write_text(example.read_text())
    bad = tmp_path / "bad.yaml"
    bad.write_text(example.read_text().replace("policy: round_robin", "policy: nope", 1))
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    run = [sys.executable, "-m", "gslbd", "check", "--config"]
    options: dict[str, Any] = {"capture_output": True, "text": True, "timeout": 60, "env": buffered}
    ok = subprocess.run([*run, str(good)], check=False, **options)
    assert (ok.returncode, ok.stdout.splitlines()[-1]) == (0, f"{good}: ok (1 zone, 4 services)")
    failed = subprocess.run([*run, str(bad)], check=False, **options)
    assert failed.returncode == 1
    assert failed.stdout.splitlines() == [
        f"error: {bad}:42: services[0].policy: unknown policy 'nope'; valid: round_robin | weighted | "
        "failover | geo | random | hash",
        f"{bad}: 1 error",
    ]
