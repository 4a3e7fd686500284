"""A reload that cannot be applied never takes DNS down: every failure kind, against a running process
under query load, leaves the old generation serving with its verdicts, answers 422 with the errors as
JSON, logs the errors once and says so in /metrics."""

from __future__ import annotations

import signal
import socket
import threading
import urllib.request
from pathlib import Path

import dns.message
import pytest
from gslbd_harness import Running, free_port, start_gslbd
from health_app_support import APP, EU, ZONE, ThreadedBackend, health_config, http_get, wait_until

TOKEN = "t0k3n"
SENTINEL = "redis+sentinel://10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/0"


class QueryLoad:
    """One client asking the app name over UDP, one query at a time, until stopped; counts the queries
    that got no answer within 2 s and the answers seen."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(2.0)
        self.sock.connect(("127.0.0.1", port))
        self.query = dns.message.make_query(APP, "A").to_wire()
        self.sent = 0
        self.unanswered = 0
        self.answers: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sent += 1
            self.sock.send(self.query)
            try:
                reply = dns.message.from_wire(self.sock.recv(4096))
            except TimeoutError:
                self.unanswered += 1
                continue
            self.answers.add(",".join(sorted(rd.to_text() for rrset in reply.answer for rd in rrset)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def good_config(eu: ThreadedBackend, us: ThreadedBackend, api_port: int, extra: str = "") -> str:
    api = f'api: {{listen: "127.0.0.1:{api_port}", token: {TOKEN}}}\n{extra}'
    return health_config("@LISTEN@", eu.port, us.port, extra=api)


def metric(api: str, name: str) -> float:
    text = urllib.request.urlopen(f"{api}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def eu_health(api: str) -> tuple[object, object]:
    status, body = http_get(f"{api}/api/v1/services/{APP}")
    assert status == 200, body
    endpoint = body["endpoints"][0]
    assert endpoint["address"] == EU[1]
    return endpoint["health"], endpoint["last_change"]


def broken_configs(tmp_path: Path, good: str) -> dict[str, tuple[str, str]]:
    """Failure kind -> (config text, a piece of the error it must give)."""
    not_a_database = tmp_path / "GeoLite2-City.mmdb"
    not_a_database.write_text("this is not a MaxMind database\n")
    zones_gone = good.replace(f"origin: {ZONE}", "origin: other.example.").replace(
        f"name: ns1.{ZONE}", "name: ns1.other.example."
    )
    broken_state = tmp_path / "other-state.json"
    broken_state.write_text("{broken")
    return {
        "a state file that is not one": (good + f"state: {{file: {broken_state}}}\n", "is not JSON"),
        "geoip database that is not one": (
            good + f"topology: {{geoip: {{database: {not_a_database}}}}}\n",
            "cannot open GeoIP database",
        ),
        "redis url typo": (good + 'cluster: {redis: {url: "redis://[::1:6379/0"}}\n', "cluster.redis.url"),
        "empty file": ("", "no zone is configured"),
        "every served zone dropped": (zones_gone.split("services:")[0], "drops every zone being served"),
        "invalid yaml": (good.replace("zones:", "zones: [\n"), "invalid YAML"),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "a state file that is not one",
        "geoip database that is not one",
        "redis url typo",
        "empty file",
        "every served zone dropped",
        "invalid yaml",
    ],
)
def test_a_reload_that_fails_keeps_answering_with_every_verdict(
    tmp_path: Path, http_backends: tuple[ThreadedBackend, ThreadedBackend], kind: str
) -> None:
    eu, us = http_backends
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    good = good_config(eu, us, api_port)
    server: Running = start_gslbd(tmp_path, good, zone=ZONE)
    load: QueryLoad | None = None
    try:
        # A verdict to keep: eu goes down, us answers.
        wait_until(lambda: eu_health(api)[0] == "up")
        eu.healthy = False
        wait_until(lambda: eu_health(api)[0] == "down")
        verdict = eu_health(api)
        listen = f'["127.0.0.1:{server.port}"]'
        text, expected = broken_configs(tmp_path, good.replace("@LISTEN@", listen))[kind]
        load = QueryLoad(server.port)
        wait_until(lambda: load is not None and load.sent > 20)

        server.config_path.write_text(text.replace("@LISTEN@", listen))
        server.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "refused" in server.log())
        status, body = http_get(f"{api}/api/v1/reload", TOKEN, "POST")
        sent_after = load.sent
        wait_until(lambda: load is not None and load.sent > sent_after + 20)
        load.stop()

        assert status == 422, body
        assert body["applied"] is False
        assert any(expected in line for line in body["errors"]), body["errors"]
        assert server.alive()
        assert load.unanswered == 0
        assert load.answers == {"198.51.100.10"}  # us, the whole time
        assert eu_health(api) == verdict  # the down verdict and its time are kept
        log = server.log()
        assert "Traceback" not in log
        assert log.count("reload of") == 2  # SIGHUP and POST: one line each, errors included
        assert metric(api, "gslbd_config_reload_failures_total") == 2
        assert metric(api, "gslbd_config_last_reload_success") == 0

        # The old config still reloads: the success is counted and the gauge goes back to 1.
        server.config_path.write_text(good.replace("@LISTEN@", listen))
        assert http_get(f"{api}/api/v1/reload", TOKEN, "POST") == (200, {"applied": True, "errors": []})
        assert metric(api, "gslbd_config_last_reload_success") == 1
        assert eu_health(api) == verdict
    finally:
        if load is not None:
            load.stop()
        server.kill()


def test_the_documented_sentinel_url_never_stops_a_running_server(
    tmp_path: Path, http_backends: tuple[ThreadedBackend, ThreadedBackend]
) -> None:
    """Python 3.11.2's urlsplit rejects this documented form (a traceback and an unlocated "reload failed:
    ValueError" before config.urls was the one parser): a reload of it is applied and DNS keeps answering."""
    eu, us = http_backends
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    good = good_config(eu, us, api_port)
    server = start_gslbd(tmp_path, good, zone=ZONE)
    load = QueryLoad(server.port)
    try:
        listen = f'["127.0.0.1:{server.port}"]'
        text = good.replace("@LISTEN@", listen) + f'cluster: {{redis: {{url: "{SENTINEL}"}}}}\n'
        server.config_path.write_text(text)
        assert http_get(f"{api}/api/v1/reload", TOKEN, "POST") == (200, {"applied": True, "errors": []})
        sent = load.sent
        wait_until(lambda: load.sent > sent + 20)
        load.stop()
        assert server.alive()
        assert load.unanswered == 0
        assert "Traceback" not in server.log()
    finally:
        load.stop()
        server.kill()
