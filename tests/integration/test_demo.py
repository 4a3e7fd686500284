"""`gslbd demo` as a user runs it: it starts, answers, and reacts to a backend failure and to an admin
command, printing a line when the answer changes; SIGTERM stops it with exit code 0."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import dns.message
import dns.query
import dns.rdatatype
from gslbd_harness import free_port, gslbd_command
from health_app_support import http_get, wait_until


class Output:
    """The lines a process prints, read in a thread so the test can wait for one with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        stream = proc.stdout
        threading.Thread(target=lambda: [self._queue.put(line) for line in stream], daemon=True).start()

    def wait_for(self, pattern: str, timeout: float = 15.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines:
                found = re.search(pattern, line)
                if found:
                    return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line matching {pattern!r} in:\n" + "".join(self.lines))
            try:
                self.lines.append(self._queue.get(timeout=left))
            except queue.Empty:
                continue


def answer(port: int) -> list[str]:
    query = dns.message.make_query("app.gslb.example.com.", dns.rdatatype.A)
    reply = dns.query.udp(query, "127.0.0.1", port=port, timeout=3)
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def test_demo_answers_and_shows_a_backend_failure_and_an_admin_change(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        gslbd_command("demo", "--port", str(port), "--api-port", "0"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    out = Output(proc)
    try:
        out.wait_for(rf"gslbd demo: DNS on 127\.0\.0\.1:{port}, admin API on http://127\.0\.0\.1:\d+")
        api = out.wait_for(r"admin API on (http://127\.0\.0\.1:\d+)").group(1)
        eu = out.wait_for(r"\[1\] eu +192\.0\.2\.10 +(http://127\.0\.0\.1:\d+)/healthz").group(1)
        printed = out.wait_for(
            r"  (.+) admin set app\.gslb\.example\.com 192\.0\.2\.10 down --api \S+ --token (\S+)$"
        )
        gslbd, token = printed.group(1), printed.group(2)
        # The printed commands name this very gslbd, so they work as printed without the venv on PATH.
        assert gslbd == f"{sys.executable} -m gslbd"
        status = out.wait_for(r"  (.+ status --api \S+)$").group(1)
        out.wait_for(rf"dig @127\.0\.0\.1 -p {port} app\.gslb\.example\.com \+short")
        out.wait_for(r"its answer stays: all_down: serve_all \(the default\) answers")
        out.wait_for(r"  app\.gslb\.example\.com A  192\.0\.2\.10$")
        out.wait_for(r"  all\.gslb\.example\.com A  192\.0\.2\.10 198\.51\.100\.10 203\.0\.113\.10$")
        assert answer(port) == ["192.0.2.10"]
        config = tmp_path / "gslbd" / "demo" / "demo.yaml"
        assert f"config: {config}" in "".join(out.lines)
        assert stat.S_IMODE(config.stat().st_mode) == 0o600  # it holds the API token
        shown = subprocess.run(
            status,
            shell=True,
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert shown.returncode == 0, shown.stderr
        assert "app.gslb.example.com" in shown.stdout

        # eu's backend fails: after fall (2) x interval (1 s) the answer moves to us.
        failed = time.monotonic()
        with urllib.request.urlopen(urllib.request.Request(f"{eu}/toggle", method="POST"), timeout=5) as r:
            assert r.read() == b"eu is failing\n"
        out.wait_for(r"  app\.gslb\.example\.com A  198\.51\.100\.10$", timeout=10)
        assert time.monotonic() - failed < 2 * 1.1 + 1.5
        assert answer(port) == ["198.51.100.10"]

        # An admin command forces us down too: ap answers, and the state file keeps it.
        request = urllib.request.Request(
            f"{api}/api/v1/services/app.gslb.example.com/endpoints/198.51.100.10/admin",
            data=json.dumps({"state": "down"}).encode(),
            method="PUT",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request, timeout=5) as r:
            assert r.status == 200
        out.wait_for(r"  app\.gslb\.example\.com A  203\.0\.113\.10$", timeout=5)
        state = json.loads((config.parent / "demo-state.json").read_text())
        assert state["admin"] == {"app.gslb.example.com.|198.51.100.10": "down"}  # and the kept verdicts
        assert http_get(f"{api}/readyz")[0] == 200

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def start_demo(port: int, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        gslbd_command("demo", "--port", str(port), "--api-port", "0"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def test_a_second_demo_stops_before_touching_the_running_ones_config(tmp_path: Path) -> None:
    """It used to rewrite demo.yaml (a new token, new backend ports) before failing to bind, so the next
    SIGHUP to the running demo pointed every check at nothing."""
    port = free_port()
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    proc = start_demo(port, env)
    out = Output(proc)
    try:
        api = out.wait_for(r"admin API on (http://127\.0\.0\.1:\d+)").group(1)
        out.wait_for(r"  app\.gslb\.example\.com A  192\.0\.2\.10$")
        config = tmp_path / "gslbd" / "demo" / "demo.yaml"
        before = config.read_text()
        lock = config.parent / "demo.lock"
        for second_port in (port, free_port()):  # the same ports, and ports that are free
            second = subprocess.run(
                gslbd_command("demo", "--port", str(second_port), "--api-port", "0"),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                env=env,
                timeout=30,
                check=False,
            )
            assert second.returncode == 1
            assert second.stderr == (
                f"gslbd demo: another gslbd demo is running (pid {proc.pid}, it holds {lock}); stop it first "
                "(Ctrl-C in its terminal, or kill it); its config and state are left as they are\n"
            )
            assert config.read_text() == before
        proc.send_signal(signal.SIGHUP)
        applied = 'gslbd_config_reloads_total{result="applied"} 1.0'
        wait_until(lambda: applied in http_get(f"{api}/metrics")[1])  # the unchanged config reloaded
        assert answer(port) == ["192.0.2.10"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def test_the_bundled_demo_config_is_valid_with_any_ports() -> None:
    from importlib import resources

    from gslbd.cli.demo_run import render
    from gslbd.config import check_config_text

    template = (resources.files("gslbd") / "examples" / "demo.yaml").read_text()
    config, problems = check_config_text(template, "demo.yaml")
    assert config is not None
    assert problems == []
    text = render(template, 15353, 0, [1001, 1002, 1003], "s3cret")
    config, problems = check_config_text(text, "demo.yaml")
    assert config is not None and problems == []
    assert str(config.dns.listen[0]) == "127.0.0.1:15353"
    assert config.api is not None and config.api.token == "s3cret"
    assert [c.port for c in config.checks] == [1001, 1002, 1003]
    assert [(c.interval, c.rise, c.fall) for c in config.checks] == [(1.0, 1, 2), (1.0, 1, 2), (1.0, 1, 1)]
