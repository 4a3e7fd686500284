"""`gslbd serve --log-format json` (and `log.format: json`): every line a JSON object, and verdicts, admin
changes and reloads carry structured fields."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path
from typing import Any

from gslbd_harness import Running, free_port, start_gslbd
from health_app_support import APP, ZONE, ThreadedBackend, health_config, wait_until

TOKEN = "t0k3n"


def records(server: Running) -> list[dict[str, Any]]:
    """Every line of the server's log, parsed (a line that is not a JSON object fails the test)."""
    out = []
    for line in server.log().splitlines():
        record = json.loads(line)
        assert isinstance(record, dict), line
        out.append(record)
    return out


def events(server: Running, event: str) -> list[dict[str, Any]]:
    return [r for r in records(server) if r.get("event") == event]


def test_json_logs_carry_verdict_admin_and_reload_fields(tmp_path: Path) -> None:
    eu, us = ThreadedBackend(), ThreadedBackend()
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    extra = f'api: {{listen: "127.0.0.1:{api_port}", token: {TOKEN}}}'
    server = start_gslbd(
        tmp_path,
        health_config("@LISTEN@", eu.port, us.port, extra=extra),
        zone=ZONE,
        extra_args=("--log-format", "json"),
    )
    try:
        eu.healthy = False
        wait_until(lambda: bool(events(server, "verdict")))
        verdict = events(server, "verdict")[0]
        assert verdict["service"] == APP and verdict["endpoint"] == "192.0.2.10"
        assert verdict["verdict"] == "down" and verdict["level"] == "info"
        assert verdict["logger"] == "gslbd.app.core"
        assert verdict["message"].startswith(f"{APP} 192.0.2.10 is down")

        url = f"{api}/api/v1/services/{APP}/endpoints/198.51.100.10/admin"
        request_admin_down(url)
        wait_until(lambda: bool(events(server, "admin")))
        admin = events(server, "admin")[0]
        assert (admin["service"], admin["endpoint"], admin["state"], admin["by"]) == (
            APP,
            "198.51.100.10",
            "down",
            "api",
        )

        server.config_path.write_text("version: 1\nservices: 12\n")
        server.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: bool(events(server, "reload")))
        refused = events(server, "reload")[0]
        assert refused["result"] == "refused" and refused["level"] == "error"
        assert refused["path"] == str(server.config_path) and len(refused["errors"]) == 1

        every = records(server)
        assert all({"time", "level", "logger", "message"} <= set(r) for r in every)
        assert any(r["message"].startswith("gslbd ") and "answering for" in r["message"] for r in every)
    finally:
        server.kill()
        eu.close()
        us.close()


def request_admin_down(url: str) -> None:
    request = urllib.request.Request(url, method="PUT", data=b'{"state": "down"}')
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200


def test_log_format_and_level_of_the_config_apply_and_the_command_line_wins(tmp_path: Path) -> None:
    text = f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones: [{{origin: {ZONE}, nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]}}]
log: {{format: json, level: warning}}
"""
    server = start_gslbd(tmp_path, text, zone=ZONE, name="from-config")
    try:
        # Something at error level: a reload of a broken file. Everything before it is in the log too.
        server.config_path.write_text("version: 1\nservices: 12\n")
        server.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: bool(events(server, "reload")))
        assert {r["level"] for r in records(server)} == {"error"}
        # A reload to text at info applies from then on: stopping is logged in text.
        listen = f'["127.0.0.1:{server.port}"]'
        new = text.replace("@LISTEN@", listen).replace("json, level: warning", "text")
        new = new.replace(
            "address: 127.0.0.1}]", 'address: 127.0.0.1}], records: [{name: info, type: TXT, value: "2"}]'
        )
        server.config_path.write_text(new)
        server.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: bool(server.ask(f"info.{ZONE}", "TXT").answer))  # the reload is applied
        assert server.stop() == 0
        last = server.log().splitlines()[-1]
        assert last.endswith(" gslbd INFO gslbd.cli.serve: stopped"), last
    finally:
        server.kill()
    server = start_gslbd(
        tmp_path, text, zone=ZONE, name="flag", extra_args=("--log-format", "text", "--log-level", "info")
    )
    try:
        wait_until(lambda: "answering for" in server.log())
        line = next(line for line in server.log().splitlines() if "answering for" in line)
        assert " gslbd INFO gslbd.cli.serve: gslbd " in line and not line.startswith("{")
    finally:
        server.kill()
