"""The operator console in a real Chromium (Debian's, driven by Playwright's Python package), against a
real gslbd process whose endpoints are probed over HTTP against local backends that the test toggles.

Screenshots go to $GSLBD_SCREENSHOTS when set, else to the test's tmp_path/screenshots (printed).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from exchange_sites import running_sites, site_config, sites_port
from gslbd_harness import Running, free_port, start_gslbd, wait_until_answering
from health_app_support import APP, ZONE, ThreadedBackend, health_config, wait_until
from redis_support import running_redis

playwright_sync = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason="chromium is not installed (scripts/test installs it)"
)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOKEN = "console-token"
EU, US = "192.0.2.10", "198.51.100.10"
ROW = f'#rows tr[data-service="{APP}"]'
SERVICES_AT_SCALE = 10_000
FIRST_PAINT_BUDGET_MS = 1000.0
DASH = "\u2013"  # an en dash, as in the page's page info
RED = "rgb(253, 231, 230)"  # --down-bg in console.css


def api_section(port: int) -> str:
    return f'api: {{listen: "127.0.0.1:{port}", token: {TOKEN}}}'


def many_services_config(api_port: int, count: int) -> str:
    """`count` services of two unchecked endpoints each, with an API."""
    lines = [
        "version: 1",
        "site: {name: eu}",
        "dns: {listen: @LISTEN@, lame_duck: 0s}",
        api_section(api_port),
        "zones:",
        f"  - origin: {ZONE}",
        f"    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]",
        "sites: {us: {}}",
        "services:",
    ]
    for i in range(count):
        net = f"10.{i // 250}.{i % 250}"
        lines.append(
            f"  - {{name: svc{i:05d}.{ZONE}, check: none, endpoints: "
            f"[{{address: {net}.1, site: eu}}, {{address: {net}.2, site: us}}]}}"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = os.environ.get("GSLBD_SCREENSHOTS")
    path = Path(target) if target else tmp_path_factory.mktemp("console") / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nconsole screenshots in {path}")
    return path


@pytest.fixture(scope="module", autouse=True)
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, int]]:
    """gslbd with 10,000 services, started first and without waiting: its start (reading and compiling
    the configuration) overlaps with the other tests of this module."""
    api_port = free_port()
    workdir = tmp_path_factory.mktemp("console-big")
    server = start_gslbd(
        workdir, many_services_config(api_port, SERVICES_AT_SCALE), zone=ZONE, name="big", wait=False
    )
    try:
        yield server, api_port
    finally:
        server.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_sync.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def answer_of(server: Running) -> list[str]:
    reply = server.ask(APP)
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def test_console_filters_turns_a_failing_service_red_live_and_forces_an_endpoint_down(
    tmp_path: Path, browser: Any, screenshots: Path
) -> None:
    eu, us = ThreadedBackend(), ThreadedBackend()
    api_port = free_port()
    config = health_config("@LISTEN@", eu.port, us.port, extra=api_section(api_port))
    server = start_gslbd(tmp_path, config, zone=ZONE)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        # Load: both services listed, the event stream connected.
        page.goto(f"http://127.0.0.1:{api_port}/")
        page.wait_for_selector(f'{ROW}[data-state="up"]')
        page.wait_for_selector('#rows tr[data-service="drained.gslb.example.com."][data-state="degraded"]')
        page.wait_for_function("document.getElementById('live').textContent === 'live'")
        assert page.inner_text("#n-services") == "2"
        page.screenshot(path=str(screenshots / "01-loaded.png"), full_page=True)

        # Filter: the list follows the search box (filtered by the server).
        page.fill("#search", "drained")
        page.wait_for_function(
            "[...document.querySelectorAll('#rows tr')].map(r => r.dataset.service).join() "
            "=== 'drained.gslb.example.com.'"
        )
        assert page.inner_text("#page-info") == f"1{DASH}1 of 1"
        page.screenshot(path=str(screenshots / "02-filtered.png"), full_page=True)
        page.fill("#search", "")
        page.wait_for_function("document.querySelectorAll('#rows tr').length === 2")

        # A backend fails: the row turns amber, then red when the other fails too, with no reload.
        page.evaluate("window.sameDocument = true")
        page.click(ROW)
        page.wait_for_selector(f'#d-endpoints tr[data-address="{EU}"]')
        eu.healthy = False
        page.wait_for_selector(f'{ROW}[data-state="degraded"]')
        page.wait_for_selector(f'#d-endpoints tr.ep-down[data-address="{EU}"]')
        us.healthy = False
        page.wait_for_selector(f'{ROW}[data-state="down"]')
        page.mouse.move(1, 1)  # off the row: no hover colour
        assert page.eval_on_selector(ROW, "r => getComputedStyle(r).backgroundColor") == RED
        assert page.evaluate("window.sameDocument") is True  # updated in place, never reloaded
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
        page.wait_for_selector(f"#changes li:has-text('{EU} → down')")
        assert page.inner_text("#n-down") == "1"
        page.screenshot(path=str(screenshots / "03-backend-failed-row-red.png"), full_page=True)

        eu.healthy = us.healthy = True
        page.wait_for_selector(f'{ROW}[data-state="up"]')

        # The admin buttons need the token: first without it, then with it typed into the page.
        down_button = f'#d-endpoints tr[data-address="{EU}"] button[data-admin="down"]'
        page.click(down_button)
        page.wait_for_selector("#admin-msg.error:has-text('Enter the API token')")
        page.fill("#token", "wrong-token")
        page.click("#token-form button[type=submit]")
        page.click(down_button)
        page.wait_for_selector("#admin-msg.error:has-text('wrong bearer token')")
        assert answer_of(server) == [EU]
        page.click("#forget")
        page.fill("#token", TOKEN)
        page.click("#token-form button[type=submit]")
        assert page.evaluate("sessionStorage.getItem('gslbd-token')") == TOKEN
        page.click(down_button)
        page.wait_for_selector(f"#admin-msg.ok:has-text('{EU}: admin down')")
        page.wait_for_selector(f'{ROW}[data-state="degraded"] .tag.admin-down')
        page.wait_for_selector(f'#d-endpoints tr.ep-admin-down[data-address="{EU}"]')
        assert answer_of(server) == [US]  # failover to us: eu is out of DNS
        page.wait_for_selector(f"#changes li.admin:has-text('{EU} → down: by api')")
        page.screenshot(path=str(screenshots / "04-forced-down.png"), full_page=True)

        # Explain in the browser: what a client gets now, and why.
        page.fill("#client", "10.1.2.3")
        page.click("#explain-form button")
        page.wait_for_selector(f"#a-records li:has-text('{APP} 30 IN A {US}')")
        assert "forced down by an admin" in page.inner_text("#a-explain")
        assert page.inner_text("#a-rcode").startswith("NOERROR for 10.1.2.3 (A)")
        page.screenshot(path=str(screenshots / "05-explain.png"), full_page=True)

        page.click(f'#d-endpoints tr[data-address="{EU}"] button[data-admin="obey"]')
        page.wait_for_selector(f'{ROW}[data-state="up"]')
        wait_until(lambda: answer_of(server) == [EU])
        assert errors == []
    finally:
        page.close()
        server.kill()
        eu.close()
        us.close()


def test_console_shows_peers_fresh_and_stale_with_heartbeat_age_and_the_redis_link_going_down(
    tmp_path: Path, browser: Any, screenshots: Path
) -> None:
    """Site eu (cluster mode on a real Redis) peers with us (running) and ap (never started)."""
    services = (
        "  - name: app\n    endpoints: [{address: 192.0.2.1, site: eu}, {address: 198.51.100.1, site: us}]\n"
    )
    port, api_port = sites_port(), free_port()
    with running_redis(tmp_path) as redis:
        cluster = f'cluster: {{redis: {{url: "{redis.url}"}}}}'
        configs = {
            site: site_config(
                site,
                port,
                services,
                interval=0.5,
                stale_after=1.5,
                timeout=0.2,
                extra=f"{api_section(api_port)}\n{cluster}\n" if site == "eu" else "",
            )
            for site in ("eu", "us")
        }
        with running_sites(tmp_path, configs, port):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            try:
                page.goto(f"http://127.0.0.1:{api_port}/")
                page.wait_for_selector('#peers tr[data-peer="us"]:not(.stale)')
                page.wait_for_selector('#peers tr.stale[data-peer="ap"]')
                assert page.inner_text("#n-peers") == "2"
                assert (page.inner_text("#n-peers-fresh"), page.inner_text("#n-peers-stale")) == ("1", "1")
                # A peer is fresh as soon as its names answer; its heartbeat comes with a later poll.
                age_cell = '#peers tr[data-peer="us"] td:nth-child(3)'
                page.wait_for_function(f"!document.querySelector('{age_cell}').innerText.startsWith('none')")
                heartbeat_age = page.inner_text(age_cell)
                assert heartbeat_age.endswith(" s") and float(heartbeat_age[:-2]) < 10, heartbeat_age
                assert page.inner_text('#peers tr[data-peer="ap"] td:nth-child(3)') == "none published"
                page.wait_for_selector("#redis.up:has-text('Redis connected')")
                assert page.inner_text("#n-members") == "1 member"
                page.screenshot(path=str(screenshots / "07-peers-and-cluster.png"), full_page=True)
                redis.kill()  # the link goes down: shown at the next summary refresh (every 5 s)
                page.wait_for_selector("#redis.down:has-text('Redis DOWN')", timeout=15_000)
                assert page.inner_text("#n-members") == "?"
                page.screenshot(path=str(screenshots / "08-redis-down.png"), full_page=True)
            finally:
                page.close()


def first_paint(page: Any, url: str) -> tuple[float, str]:
    """Load the console in `page`: (ms from navigation to the first rows painted, what was measured)."""
    page.goto(url)
    page.wait_for_function("document.body.dataset.firstRows !== undefined")
    figures = page.evaluate(
        """() => {
            const rows = performance.getEntriesByName('gslbd-rows-painted')[0].startTime;
            const fcp = performance.getEntriesByName('first-contentful-paint')[0];
            const request = performance.getEntriesByType('resource')
                .find(e => e.name.includes('/api/v1/service-rows'));
            return [rows, Number(document.body.dataset.firstRows), fcp ? fcp.startTime : -1,
                    request ? request.responseEnd - request.requestStart : -1];
        }"""
    )
    rows, after_script, fcp, request = (float(x) for x in figures)
    return rows, (
        f"first rows painted {rows:.0f} ms after navigation ({after_script:.0f} ms after the script "
        f"started; the rows request took {request:.0f} ms); first contentful paint {fcp:.0f} ms"
    )


@pytest.mark.timeout(180)
def test_console_first_paint_at_10000_services_is_under_a_second(
    big: tuple[Running, int], browser: Any, screenshots: Path
) -> None:
    """Three page loads, each in a fresh browser context (nothing cached); all are printed and the best
    must be under a second (one load can be held up by a machine busy with other work)."""
    server, api_port = big
    wait_until_answering(server, timeout=150)  # 10,000 services take a while to start
    url = f"http://127.0.0.1:{api_port}/"
    loads: list[float] = []
    for attempt in range(3):
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        if attempt < 2:
            try:
                ms, text = first_paint(page, url)
            finally:
                page.close()
            loads.append(ms)
            print(f"\nconsole at {SERVICES_AT_SCALE} services, load {attempt + 1}: {text}")
    try:
        ms, text = first_paint(page, url)
        loads.append(ms)
        print(f"\nconsole at {SERVICES_AT_SCALE} services, load 3: {text}")
        assert min(loads) < FIRST_PAINT_BUDGET_MS, loads
        assert page.eval_on_selector_all("#rows tr", "rows => rows.length") == 100
        assert page.inner_text("#n-services") == "10,000"
        assert page.inner_text("#page-info") == f"1{DASH}100 of 10,000"
        page.click("#next")
        page.wait_for_selector("#rows tr[data-service='svc00100.gslb.example.com.']")
        assert page.inner_text("#page-info") == f"101{DASH}200 of 10,000"
        page.screenshot(path=str(screenshots / "06-10000-services.png"), full_page=True)
        page.fill("#search", "svc09999")
        page.wait_for_function("document.querySelectorAll('#rows tr').length === 1")
        assert page.get_attribute("#rows tr", "data-service") == f"svc09999.{ZONE}"
    finally:
        page.close()
