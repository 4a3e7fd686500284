"""Load figures across sites: two real gslbd sites (eu on 127.0.0.2, us on 127.0.0.3), each with one
endpoint whose real HTTP backend reports its load. Each site fetches only its own endpoint's load and
publishes the used figure in its exchange zone (TXT under `load.`); the other answers the learned
endpoint with it (docs/multisite.md). When eu's backend reports a load in the shedding band, both sites
draw by the same weights; above `shed_load.high` eu's endpoint leaves us's answers within the documented
time (the owner's figure climbs by MAX_STEP per interval, then one NOTIFY and transfer)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from exchange_sites import (
    ZONE,
    addresses,
    api_url,
    get_json,
    running_sites,
    site_config,
    sites_port,
    wait_for,
)
from gslbd_harness import Running, free_port
from health_app_support import ThreadedBackend

SITES = ("eu", "us")
HOSTS = {"eu": "127.0.0.2", "us": "127.0.0.3"}
ADDRESS = {"eu": "192.0.2.1", "us": "198.51.100.1"}
APP = f"app.{ZONE}"
EVERY = 0.2  # load.every
INTERVAL = 1.0  # peers.interval (NOTIFY makes a change travel sooner)
# 0.1 -> 0.95 at MAX_STEP (0.1) per interval: 9 intervals to pass high (0.8), plus the first fetch and
# jitter; then the owner's NOTIFY and the peer's transfer, bounded by one peers.interval
SHIFT = 12 * EVERY + INTERVAL


def services(backends: Mapping[str, ThreadedBackend]) -> str:
    load = f"every: {EVERY}s, timeout: 150ms, half_life: 200ms"
    listed = "\n".join(
        f"      - {{address: {ADDRESS[s]}, site: {s},"
        f' load: {{url: "http://127.0.0.1:{backends[s].port}/load", {load}}}}}'
        for s in SITES
    )
    return f"""\
  - name: app
    policy: weighted
    weight_from: load
    shed_load: {{low: 0.5, high: 0.8}}
    endpoints:
{listed}
"""


@pytest.fixture
def backends() -> Iterator[dict[str, ThreadedBackend]]:
    made = {s: ThreadedBackend() for s in SITES}
    for backend in made.values():
        backend.load = b"0.1"
    yield made
    for backend in made.values():
        with contextlib.suppress(OSError):
            backend.close()


@contextlib.contextmanager
def load_sites(
    workdir: Path, backends: Mapping[str, ThreadedBackend]
) -> Iterator[tuple[dict[str, Running], dict[str, str]]]:
    """Both sites running, once each answers both endpoints; (site -> its server, site -> its API URL)."""
    port = sites_port(SITES)
    apis = {s: api_url(s, free_port((HOSTS[s],))) for s in SITES}
    configs = {
        s: site_config(
            s,
            port,
            services(backends),
            sites=SITES,
            interval=INTERVAL,
            stale_after=30.0,
            extra=f'api: {{listen: "{apis[s].removeprefix("http://")}"}}\n',
        )
        for s in SITES
    }
    with running_sites(workdir, configs, port) as running:
        both = set(ADDRESS.values())
        for server in running.values():
            wait_for(lambda server=server: answered(server) == both, 15)
        yield running, apis
        for server in running.values():
            assert server.alive()


def answered(server: Running, queries: int = 40) -> set[str]:
    seen: set[str] = set()
    for _ in range(queries):
        seen |= addresses(server, APP)
    return seen


def weights(api: str) -> dict[str, tuple[float | None, int | None]]:
    """address -> (load figure, weight drawn by) of service app, as a site's status API shows them."""
    status = get_json(f"{api}/api/v1/services/{APP}")
    assert isinstance(status, dict)
    return {e["address"]: (e.get("load"), e.get("load_weight")) for e in status["endpoints"]}


def published(server: Running, site: str) -> set[str]:
    """The load figures `site` publishes for app (TXT at app.load.<its exchange apex>)."""
    reply = server.ask(f"app.load._gslbd-exchange-{site}.{ZONE}", "TXT")
    return {rd.strings[0].decode() for rrset in reply.answer for rd in rrset}


def test_a_sites_load_figure_reaches_its_peer_and_both_draw_by_the_same_weights(
    tmp_path: Path, backends: dict[str, ThreadedBackend]
) -> None:
    with load_sites(tmp_path, backends) as (_, apis):
        backends["eu"].load = b"0.6"  # in the shedding band: a lower weight, still answered

        def settled() -> bool:  # the used figure stops within the dead band (0.005) of the smoothed one
            figure = weights(apis["eu"])[ADDRESS["eu"]][0]
            return figure is not None and figure >= 0.595

        wait_for(settled, 10)
        wait_for(lambda: weights(apis["us"]) == weights(apis["eu"]), SHIFT)
        figure, weight = weights(apis["us"])[ADDRESS["eu"]]
        assert figure is not None and 0.595 <= figure <= 0.6
        assert weight == round(1000 * (1 - figure) * (0.8 - figure) / 0.3)
        assert weights(apis["us"])[ADDRESS["us"]] == (0.1, 900)


def test_a_loaded_endpoint_leaves_the_peer_sites_answers_within_the_documented_time(
    tmp_path: Path, backends: dict[str, ThreadedBackend]
) -> None:
    with load_sites(tmp_path, backends) as (sites, _):
        eu, us = ADDRESS["eu"], ADDRESS["us"]
        assert published(sites["eu"], "eu") == {f"{eu}=0.100"}
        backends["eu"].load = b"0.95"  # above shed_load.high at eu: out of every site's answers
        began = time.monotonic()
        wait_for(lambda: next(iter(published(sites["eu"], "eu"))).endswith(",out"), SHIFT)
        # in the band on the way up eu is drawn rarely (a few %), so out is told by many queries
        wait_for(lambda: answered(sites["us"], 200) == {us}, SHIFT)
        assert time.monotonic() - began <= SHIFT + 2  # (plus the checks' own queries)
        assert answered(sites["eu"], 200) == {us}  # the owner sheds it alike
        assert answered(sites["us"], 200) == {us}  # out: weight 0, never drawn
        backends["eu"].load = b"0.1"  # back below the return mark
        wait_for(lambda: answered(sites["us"]) == {eu, us}, SHIFT)
