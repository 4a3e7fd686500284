"""Timings of the exchange between two real sites: a change without NOTIFY arrives within one poll
interval; an HTTP endpoint failure reaches the other site in check time plus milliseconds with NOTIFY;
a silent peer keeps counting until stale_after, then not; discovery through NS names; reload."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from exchange_sites import HOSTS, addresses, running_sites, site_config, sites_port, wait_for
from gslbd_harness import Running, free_port

EU, US = "192.0.2.1", "198.51.100.1"
PAIR = ("eu", "us")
INTERVAL, STALE_AFTER, TIMEOUT = 1.0, 3.0, 0.3


class Backend:
    """An HTTP server on 127.0.0.1 answering 200, or 503 after `fail()`."""

    def __init__(self) -> None:
        self.healthy = True
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200 if backend.healthy else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def services(checked: bool = False) -> str:
    """app fails over eu -> us; `checked`: eu's endpoint is checked with the `web` profile (`checks`)."""
    check = ", check: web" if checked else ""
    return f"""\
  - name: app
    policy: failover
    failover_order: [eu, us]
    endpoints:
      - {{address: {EU}, site: eu, probe_address: 127.0.0.1{check}}}
      - {{address: {US}, site: us}}
  - name: all
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: {US}, site: us}}
"""


def checks(port: int) -> str:
    return (
        f"checks:\n  web: {{type: http, port: {port}, interval: 200ms, timeout: 150ms, rise: 1, fall: 1}}\n"
    )


@pytest.fixture
def backend() -> Iterator[Backend]:
    b = Backend()
    yield b
    b.close()


@contextlib.contextmanager
def pair(workdir: Path, text: str, **options: object) -> Iterator[dict[str, Running]]:
    """Sites eu and us serving `text`, once both know each other."""
    port = sites_port(PAIR)
    configs = {s: site_config(s, port, text, sites=PAIR, **options) for s in PAIR}  # type: ignore[arg-type]
    with running_sites(workdir, configs, port) as running:
        for server in running.values():
            wait_for(lambda server=server: addresses(server, "all.gslb.test.") == {EU, US}, 10)
        yield running


def measure_failover(running: dict[str, Running], backend: Backend) -> tuple[float, float]:
    """Fail eu's backend: seconds until eu stops publishing its endpoint, and until us stops answering it."""
    wait_for(lambda: addresses(running["us"], "app.gslb.test.") == {EU}, 5)
    backend.healthy = False
    at_eu = wait_for(lambda: addresses(running["eu"], "localtargets-app.gslb.test.") == set(), 5)
    at_us = wait_for(lambda: addresses(running["us"], "app.gslb.test.") == {US}, 5) + at_eu
    return at_eu, at_us


def test_without_notify_a_change_arrives_within_one_poll_interval(tmp_path: Path, backend: Backend) -> None:
    timings = dict(interval=INTERVAL, stale_after=STALE_AFTER, timeout=TIMEOUT, notify=False)
    with pair(tmp_path, services(checked=True), extra=checks(backend.port), **timings) as running:
        at_eu, at_us = measure_failover(running, backend)
        print(
            f"\nwithout NOTIFY (poll every {INTERVAL:g} s): HTTP failure -> eu stops publishing after "
            f"{at_eu * 1000:.0f} ms, us answers without it after {at_us * 1000:.0f} ms"
        )
        assert at_us - at_eu < INTERVAL + TIMEOUT + 1.0  # one interval, plus the query, plus a busy machine


def test_with_notify_an_http_endpoint_failure_reaches_the_other_site_in_milliseconds(
    tmp_path: Path, backend: Backend
) -> None:
    timings = dict(interval=5.0, stale_after=30.0, timeout=TIMEOUT, notify=True)
    with pair(tmp_path, services(checked=True), extra=checks(backend.port), **timings) as running:
        at_eu, at_us = measure_failover(running, backend)
        print(
            f"\nwith NOTIFY (poll every 5 s): HTTP failure -> eu stops publishing after "
            f"{at_eu * 1000:.0f} ms, us answers without it after {at_us * 1000:.0f} ms "
            f"({(at_us - at_eu) * 1000:.0f} ms after eu)"
        )
        assert at_us - at_eu < 1.0  # the next poll is up to 5 s away: this is NOTIFY
        backend.healthy = True
        us = running["us"]
        back = wait_for(lambda: addresses(us, "app.gslb.test.") == {EU}, 5)
        print(f"with NOTIFY: failback visible at us {back * 1000:.0f} ms after the backend recovered")


def test_a_silent_peer_counts_until_stale_after_then_not_and_again_when_it_answers(tmp_path: Path) -> None:
    timings = dict(interval=INTERVAL, stale_after=STALE_AFTER, timeout=TIMEOUT, notify=True)
    with pair(tmp_path, services(), **timings) as running:
        us, eu = running["us"], running["eu"]
        logged = len(eu.log())
        os.kill(us.proc.pid, signal.SIGSTOP)  # us stops answering (and stops polling)
        try:
            stopped = time.monotonic()
            time.sleep(STALE_AFTER - INTERVAL - 0.5)
            assert addresses(eu, "all.gslb.test.") == {EU, US}  # still trusted
            wait_for(lambda: addresses(eu, "all.gslb.test.") == {EU}, 10)
            after = time.monotonic() - stopped
        finally:
            os.kill(us.proc.pid, signal.SIGCONT)
        print(f"\nsilent peer: its endpoints stopped counting {after:.2f} s after it went silent")
        assert STALE_AFTER - INTERVAL - TIMEOUT <= after <= STALE_AFTER + INTERVAL + TIMEOUT + 1.5
        back = wait_for(lambda: addresses(eu, "all.gslb.test.") == {EU, US}, 5)
        print(f"silent peer: counted again {back * 1000:.0f} ms after it resumed")
        log = eu.log()[logged:]  # once each, not per poll
        assert log.count("peer us is stale") == 1
        assert log.count("peer us does not answer") == 1


def test_discover_ns_finds_the_peer_through_the_zones_nameservers(tmp_path: Path) -> None:
    timings = dict(interval=INTERVAL, stale_after=STALE_AFTER, timeout=TIMEOUT, discover=True)
    with pair(tmp_path, services(), **timings) as running:
        assert addresses(running["eu"], "all.gslb.test.") == {EU, US}
        assert addresses(running["us"], "app.gslb.test.") == {EU}


def test_reload_rereads_the_peers(tmp_path: Path) -> None:
    timings = dict(interval=INTERVAL, stale_after=STALE_AFTER, timeout=TIMEOUT)
    with pair(tmp_path, services(), **timings) as running:
        eu = running["eu"]

        def answers() -> set[str]:
            return addresses(eu, "all.gslb.test.")

        text = eu.config_path.read_text()
        moved = text.replace(f'nameservers: ["{HOSTS["us"]}:', 'nameservers: ["127.0.0.9:')
        assert moved != text
        eu.config_path.write_text(moved)  # us's nameserver moves to an address where nobody answers
        os.kill(eu.proc.pid, signal.SIGHUP)
        gone = wait_for(lambda: answers() == {EU}, STALE_AFTER + 5)
        print(f"\nreload: us unreachable at its new address, stale after {gone:.2f} s")
        eu.config_path.write_text(text)
        os.kill(eu.proc.pid, signal.SIGHUP)
        wait_for(lambda: answers() == {EU, US}, 5)


def test_with_worker_processes_notify_and_the_heartbeat_still_work(tmp_path: Path, backend: Backend) -> None:
    checked_us = f"{{address: {US}, site: us, probe_address: 127.0.0.1, check: web}}"
    text = services().replace(f"{{address: {US}, site: us}}", checked_us)
    text = text.replace(f"{{address: {EU}, site: eu}}", f"{{address: {EU}, site: eu, check: none}}")
    port = sites_port(PAIR)
    options = dict(sites=PAIR, interval=5.0, stale_after=30.0, timeout=TIMEOUT, extra=checks(backend.port))
    configs = {s: site_config(s, port, text, **options) for s in PAIR}  # type: ignore[arg-type]
    configs["eu"] = configs["eu"].replace("lame_duck: 0s}", "lame_duck: 0s, workers: 2}")
    with running_sites(tmp_path, configs, port) as running:
        eu = running["eu"]
        wait_for(lambda: addresses(eu, "all.gslb.test.") == {EU, US}, 10)
        backend.healthy = False  # us's endpoint fails; us NOTIFYs eu, whose workers pass it on
        at_us = wait_for(lambda: addresses(running["us"], "localtargets-all.gslb.test.") == set(), 5)
        at_eu = wait_for(lambda: addresses(eu, "all.gslb.test.") == {EU}, 5) + at_us
        print(f"\nworkers: us's failure visible at eu (2 workers) {(at_eu - at_us) * 1000:.0f} ms after us")
        assert at_eu - at_us < 1.0  # polls are 5 s apart

        def heartbeat() -> float:
            reply = eu.ask("heartbeat-eu.gslb.test.", "TXT")
            return float(reply.answer[0][0].strings[0])

        first = heartbeat()
        wait_for(lambda: heartbeat() > first, 5)  # refreshed every interval/2 = 2.5 s


def test_a_dead_first_nameserver_of_a_peer_is_skipped_for_the_next_one(tmp_path: Path) -> None:
    port = sites_port(PAIR)
    configs = {
        s: site_config(s, port, services(), sites=PAIR, interval=INTERVAL, timeout=TIMEOUT) for s in PAIR
    }
    api_port = free_port((HOSTS["eu"],))
    both = f'nameservers: ["127.0.0.9:{port}", "{HOSTS["us"]}:{port}"]'  # nobody answers on 127.0.0.9
    configs["eu"] = configs["eu"].replace(f'nameservers: ["{HOSTS["us"]}:{port}"]', both)
    configs["eu"] += f'api: {{listen: "{HOSTS["eu"]}:{api_port}"}}\n'
    with running_sites(tmp_path, configs, port) as running:
        eu = running["eu"]
        wait_for(lambda: addresses(eu, "all.gslb.test.") == {EU, US}, 10)
        with urllib.request.urlopen(f"http://{HOSTS['eu']}:{api_port}/api/v1/peers", timeout=5) as response:
            (us,) = json.loads(response.read())["peers"]
        assert (us["name"], us["state"], us["failing"]) == ("us", "fresh", False)
        assert us["errors"] >= 1  # the first nameserver failed, and the poll went on at the second
