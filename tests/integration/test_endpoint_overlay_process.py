"""The endpoint overlay on a real `gslbd serve` process, driven by `gslbd endpoints` and read by
`gslbd status` and dnspython: added, patched and removed endpoints are answered, shown with their
source, and still applied after the process is stopped and started again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gslbd_harness import Running, free_port, start_gslbd

TOKEN = "overlay-process-token"
ZONE = "gslb.example.com."
APP = f"app.{ZONE}"


def config(api_port: int, state: Path) -> str:
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
api: {{listen: "127.0.0.1:{api_port}", token: {TOKEN}}}
state: {{file: {state}}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
services:
  - name: {APP}
    check: none
    endpoints:
      - {{address: 192.0.2.10, site: eu}}
      - {{address: 198.51.100.10, site: us}}
"""


def gslbd(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "GSLBD_API_TOKEN"}
    command = [sys.executable, "-m", "gslbd", *args]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=30, env=environ)


def answered(server: Running) -> list[str]:
    return sorted(rd.to_text() for rrset in server.ask(APP).answer for rd in rrset)


def test_endpoints_changed_with_the_cli_are_answered_shown_and_kept_across_a_restart(tmp_path: Path) -> None:
    api_port = free_port()
    text = config(api_port, tmp_path / "state.json")
    api = ("--api", f"http://127.0.0.1:{api_port}")
    flags = (*api, "--token", TOKEN)
    server = start_gslbd(tmp_path, text, zone=ZONE)
    try:
        assert answered(server) == ["192.0.2.10", "198.51.100.10"]
        done = gslbd("endpoints", "add", APP, "203.0.113.7", "--site", "us", "--weight", "2", *flags)
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == f"{APP} 203.0.113.7: added (source overlay, weight 2, now answered: yes)\n"
        done = gslbd("endpoints", "patch", "app", "192.0.2.10", "--weight", "5", *flags)
        assert done.returncode == 0, done.stderr
        done = gslbd("endpoints", "remove", APP, "198.51.100.10", *flags)
        assert (done.returncode, done.stdout) == (0, f"{APP} 198.51.100.10: removed\n")
        assert answered(server) == ["192.0.2.10", "203.0.113.7"]
        bad = gslbd("endpoints", "add", APP, "203.0.113.8", "--weight", "5000", *flags)
        assert (bad.returncode, bad.stderr) == (
            1,
            "gslbd endpoints add: 422 not changed: invalid endpoint: weight: must be between 0 and 1000, "
            "got 5000\n",
        )
        unauthorized = gslbd("endpoints", "remove", APP, "192.0.2.10", *api)
        assert unauthorized.returncode == 1
        assert unauthorized.stderr.endswith("(give --token or set GSLBD_API_TOKEN)\n")
    finally:
        assert server.stop() == 0
    server = start_gslbd(tmp_path, text, zone=ZONE, port=server.port)  # the same process, started again
    try:
        assert answered(server) == ["192.0.2.10", "203.0.113.7"]
        status = gslbd("status", *api)
        assert status.returncode == 0, status.stderr
        rows = [line.split() for line in status.stdout.splitlines()[1:]]
        assert rows == [
            [APP, "192.0.2.10", "eu", "unknown", "obey", "up", "config", "patched(weight)", "-"],
            [APP, "203.0.113.7", "us", "unknown", "obey", "up", "overlay", "-"],
            [APP, "198.51.100.10", "us", "-", "-", "removed", "config", "-"],
        ]
    finally:
        server.stop()
