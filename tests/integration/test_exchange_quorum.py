"""peers.quorum with three real gslbd sites on 127.0.0.2-4 and real HTTP backends (one per site).

Every site probes every endpoint and publishes its votes in its exchange zone; with `votes: 2` an
endpoint leaves the answers when two sites see it down. A backend only one site cannot reach stays in
every answer; a dead one leaves every site's answers within a few intervals; a site lost as a whole
(process and backend) leaves the others' answers within 3 intervals, long before stale_after; a site
cut off from both peers keeps answering what was agreed (fail static) and says it is partitioned.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from exchange_sites import (
    HOSTS,
    ZONE,
    addresses,
    api_url,
    get_json,
    metric,
    running_sites,
    site_config,
    sites_port,
    wait_for,
)
from gslbd_harness import Running, free_port
from health_app_support import ThreadedBackend

SITES = ("eu", "us", "ap")
ADDRESS = {"eu": "192.0.2.1", "us": "198.51.100.1", "ap": "203.0.113.1"}
INTERVAL = 1.0  # peers.interval; checks run every 300 ms with fall 1
UNREACHABLE = "127.0.0.9"  # nothing listens there: a probe to it is refused


def services(probe: Mapping[str, str]) -> str:
    """`all` (every site's endpoint) and `fo` (failover us -> ap -> eu), each endpoint checked on its
    site's backend; `probe`: endpoint site -> the address this site probes it at."""

    def endpoint(site: str) -> str:
        return f"{{address: {ADDRESS[site]}, site: {site}, probe_address: {probe[site]}, check: web_{site}}}"

    listed = "\n".join(f"      - {endpoint(s)}" for s in SITES)
    return f"""\
  - name: all
    endpoints:
{listed}
  - name: fo
    policy: failover
    failover_order: [us, ap, eu]
    endpoints:
{listed}
"""


def checks(backends: Mapping[str, ThreadedBackend]) -> str:
    lines = "\n".join(
        f"  web_{s}: {{type: http, port: {b.port}, interval: 300ms, timeout: 200ms, rise: 1, fall: 1}}"
        for s, b in backends.items()
    )
    return f"checks:\n{lines}\n"


@contextlib.contextmanager
def quorum_sites(
    workdir: Path,
    backends: Mapping[str, ThreadedBackend],
    *,
    stale_after: float = 30.0,
    cannot_reach: tuple[str, str] | None = None,
) -> Iterator[tuple[dict[str, Running], dict[str, str]]]:
    """The three sites with `peers.quorum: {votes: 2}`, once each answers every endpoint of `all`.
    `cannot_reach` (site, endpoint site): that site probes that endpoint at an address nobody serves."""
    port = sites_port()
    apis = {s: api_url(s, free_port((HOSTS[s],))) for s in SITES}
    configs = {}
    for site in SITES:
        probe = {s: "127.0.0.1" for s in SITES}
        if cannot_reach is not None and cannot_reach[0] == site:
            probe[cannot_reach[1]] = UNREACHABLE
        extra = checks(backends) + f'api: {{listen: "{apis[site].removeprefix("http://")}"}}\n'
        text = site_config(
            site, port, services(probe), interval=INTERVAL, stale_after=stale_after, extra=extra
        )
        configs[site] = text.replace("peers:\n", "peers:\n  quorum: {votes: 2}\n", 1)
    with running_sites(workdir, configs, port) as running:
        every = set(ADDRESS.values())
        for server in running.values():
            wait_for(lambda server=server: addresses(server, f"all.{ZONE}") == every, 15)
        yield running, apis


@pytest.fixture
def backends() -> Iterator[dict[str, ThreadedBackend]]:
    made = {s: ThreadedBackend() for s in SITES}
    yield made
    for backend in made.values():
        with contextlib.suppress(OSError):
            backend.close()


def votes_of(server: Running, site: str) -> set[str]:
    """The votes `site` publishes on service `all` (TXT at all.votes.<its exchange apex>)."""
    reply = server.ask(f"all.votes._gslbd-exchange-{site}.{ZONE}", "TXT")
    return {rd.strings[0].decode() for rrset in reply.answer for rd in rrset}


def holds_for(check: Callable[[], bool], seconds: float) -> int:
    """Check `check()` over `seconds` (every 50 ms): AssertionError at the first time it is false;
    the number of checks made."""
    end, count = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        assert check(), f"false after {count} checks"
        count += 1  # no pause: each check's DNS round trips pace the loop
    return count


def test_a_backend_one_site_cannot_reach_stays_in_every_answer_and_a_dead_one_leaves_them_all(
    tmp_path: Path, backends: dict[str, ThreadedBackend]
) -> None:
    with quorum_sites(tmp_path, backends, cannot_reach=("us", "eu")) as (running, apis):
        eu = ADDRESS["eu"]
        # us really sees eu's endpoint down and says so; eu and ap see it up
        wait_for(lambda: f"{eu}=down" in votes_of(running["us"], "us"), 10)
        for site in ("eu", "ap"):  # (a site just started may not have probed yet: no vote)
            wait_for(lambda site=site: f"{eu}=up" in votes_of(running[site], site), 10)
        wait_for(
            lambda: (
                metric(
                    apis["us"],
                    'gslbd_quorum_votes{address="192.0.2.1",service="all.gslb.test.",verdict="down"}',
                )
                == 1
            ),
            10,
        )
        # ... and over three poll intervals every site, us included, keeps answering it
        checks_made = holds_for(
            lambda: all(eu in addresses(server, f"all.{ZONE}") for server in running.values()), 3 * INTERVAL
        )
        assert checks_made > 10
        assert eu in addresses(running["eu"], f"localtargets-all.{ZONE}")

        began = time.monotonic()
        backends["eu"].healthy = False  # 503 to every site: really dead
        for server in running.values():
            wait_for(lambda server=server: eu not in addresses(server, f"all.{ZONE}"), 3 * INTERVAL + 1)
        took = time.monotonic() - began
        print(f"a dead backend left every site's answers {took * 1000:.0f} ms after it failed")


def test_a_lost_site_leaves_the_others_answers_within_three_intervals_not_stale_after(
    tmp_path: Path, backends: dict[str, ThreadedBackend]
) -> None:
    with quorum_sites(tmp_path, backends, stale_after=60.0) as (running, apis):
        eu = ADDRESS["eu"]
        began = time.monotonic()
        running["eu"].kill()  # the whole site: its nameserver and its backend
        backends["eu"].close()
        for site in ("us", "ap"):
            wait_for(lambda site=site: eu not in addresses(running[site], f"all.{ZONE}"), 3 * INTERVAL)
        took = time.monotonic() - began
        print(f"a lost site left the other sites' answers after {took * 1000:.0f} ms (stale_after 60 s)")
        # us's next poll of eu fails: eu is not heard, but us still hears ap, a majority with itself
        wait_for(lambda: metric(apis["us"], 'gslbd_exchange_peer_heard{peer="eu"}') == 0, 2 * INTERVAL + 1)
        assert metric(apis["us"], "gslbd_exchange_partitioned") == 0
        assert eu not in addresses(running["us"], f"all.{ZONE}")


def test_a_site_cut_off_from_every_peer_does_not_fail_over_on_its_own_view(
    tmp_path: Path, backends: dict[str, ThreadedBackend]
) -> None:
    stale_after = 3.0
    with quorum_sites(tmp_path, backends, stale_after=stale_after) as (running, apis):
        us = ADDRESS["us"]
        wait_for(lambda: addresses(running["eu"], f"fo.{ZONE}") == {us}, 5)
        running["us"].kill()  # eu hears nobody: partitioned (the backends still run)
        running["ap"].kill()
        wait_for(lambda: metric(apis["eu"], "gslbd_exchange_partitioned") == 1, 3 * INTERVAL + 1)
        # past stale_after eu still answers what was agreed, us's endpoint, and not its own
        holds_for(lambda: addresses(running["eu"], f"fo.{ZONE}") == {us}, stale_after + 2 * INTERVAL)
        assert addresses(running["eu"], f"all.{ZONE}") == set(ADDRESS.values())
        peers = get_json(f"{apis['eu']}/api/v1/peers")
        assert isinstance(peers, dict) and peers["partitioned"] is True, peers
        assert "partitioned" in running["eu"].log()
