"""Cluster mode with a quorum: three sites on loopback (eu, us, ap), two `gslbd serve` instances per site
sharing one real redis-server per site, `peers.quorum: {votes: 2}`, every peer site listed with both of its
instances. One HTTP backend per site's endpoint, which tells the probes of each site apart by their path
(each site's check asks /probe/<site>) and can fail for some sites only. Proven: per site exactly one
instance probes each endpoint, its own and the remote ones, per cycle (the existing SETNX lock); both
instances of a site publish and serve the same votes; an endpoint leaves every instance's answers of every
site when two sites see it down, and not when one does (even while its owner sees it up).

    pytest -p no:cacheprovider tests/integration/test_cluster_quorum.py -s
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import CountingBackend
from exchange_sites import ZONE, addresses, ms, site_config, wait_for
from gslbd_harness import Running, free_port, start_gslbd
from redis_support import RedisProcess, running_redis

pytestmark = pytest.mark.integration

SITES = ("eu", "us", "ap")
INSTANCES = {
    "eu": ("127.0.0.2", "127.0.0.12"),
    "us": ("127.0.0.3", "127.0.0.13"),
    "ap": ("127.0.0.4", "127.0.0.14"),
}
ENDPOINTS = {"eu": "127.0.21.1", "us": "127.0.22.1", "ap": "127.0.23.1"}
CHECK_INTERVAL, FALL = 0.5, 2
PEER_INTERVAL, STALE_AFTER, PEER_TIMEOUT = 1.0, 5.0, 0.3
# Two sites' verdicts: FALL failed probes (the first within one interval), then the vote over NOTIFY +
# IXFR or the next poll, and a second for a busy machine.
VOTE_BOUND = (FALL + 1) * CHECK_INTERVAL + PEER_INTERVAL + PEER_TIMEOUT + 1.0
RR = f"rr.{ZONE}"


class Backends:
    """One counting HTTP server per endpoint address (all on `port`, cluster_support.CountingBackend):
    GET /probe/<site> counts a probe of that site and answers 503 while (address, site) is failing."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.servers = {address: CountingBackend(address, port) for address in ENDPOINTS.values()}

    def counts(self) -> Counter[tuple[str, str]]:
        out: Counter[tuple[str, str]] = Counter()
        for address, server in self.servers.items():
            with server.lock:
                out.update({(address, site): n for site, n in server.probes.items()})
        return out

    def fail(self, address: str, *sites: str) -> None:
        server = self.servers[address]
        with server.lock:
            server.failing |= set(sites)

    def heal(self) -> None:
        for server in self.servers.values():
            with server.lock:
                server.failing.clear()

    def close(self) -> None:
        for server in self.servers.values():
            server.close()


def instance_config(site: str, host: str, port: int, backend_port: int, redis_url: str) -> str:
    """The config of one instance of `site` on `host`: the site's own config, its peers with both of
    their instances, the site's redis."""
    endpoints = "\n".join(f"      - {{address: {a}, site: {s}, check: web}}" for s, a in ENDPOINTS.items())
    services = f"  - name: rr\n    endpoints:\n{endpoints}\n"
    check = (
        f"checks:\n  web: {{type: http, port: {backend_port}, path: /probe/{site}, "
        f"interval: {ms(CHECK_INTERVAL)}, timeout: 300ms, rise: 1, fall: {FALL}}}\n"
    )
    cluster = f'cluster:\n  redis: {{url: "{redis_url}", key_prefix: "gslb:", sync_mode: lock}}\n'
    hosts = {s: INSTANCES[s][0] for s in SITES} | {site: host}
    text = site_config(
        site,
        port,
        services,
        interval=PEER_INTERVAL,
        stale_after=STALE_AFTER,
        timeout=PEER_TIMEOUT,
        extra=check + cluster,
        hosts=hosts,
    ).replace("peers:\n", "peers:\n  quorum: {votes: 2}\n", 1)
    for peer in SITES:
        if peer != site:
            both = ", ".join(f'"{h}:{port}"' for h in INSTANCES[peer])
            text = text.replace(f'nameservers: ["{INSTANCES[peer][0]}:{port}"]', f"nameservers: [{both}]")
    return text


@contextlib.contextmanager
def cluster_sites(workdir: Path) -> Iterator[tuple[dict[tuple[str, str], Running], Backends]]:
    """Every site's redis and its two instances running, and the backends (all stopped at the end)."""
    port = free_port(tuple(h for hosts in INSTANCES.values() for h in hosts))
    backends = Backends(free_port(tuple(ENDPOINTS.values())))
    servers: dict[tuple[str, str], Running] = {}
    try:
        with contextlib.ExitStack() as stack:
            redis: dict[str, RedisProcess] = {
                s: stack.enter_context(running_redis(workdir / s)) for s in SITES
            }
            try:
                for site in SITES:
                    for host in INSTANCES[site]:
                        text = instance_config(site, host, port, backends.port, redis[site].url)
                        servers[(site, host)] = start_gslbd(
                            workdir, text, zone=ZONE, hosts=(host,), name=f"{site}-{host}", port=port,
                            extra_args=("--log-level", "info"),
                        )  # fmt: skip
                yield servers, backends
            finally:
                for server in servers.values():
                    server.kill()
    finally:
        backends.close()


def votes(server: Running, site: str) -> set[str]:
    """The votes on `rr` that an instance of `site` publishes (TXT in its exchange zone)."""
    reply = server.ask(f"rr.votes._gslbd-exchange-{site}.{ZONE}", "TXT")
    return {rd.strings[0].decode() for rrset in reply.answer for rd in rrset}


def answers(servers: dict[tuple[str, str], Running]) -> dict[tuple[str, str], set[str]]:
    return {key: addresses(server, RR) for key, server in servers.items()}


def test_per_site_one_instance_probes_each_endpoint_both_publish_the_same_votes_and_two_sites_take_it_out(
    tmp_path: Path,
) -> None:
    everyone = set(ENDPOINTS.values())
    eu_endpoint = ENDPOINTS["eu"]
    with cluster_sites(tmp_path) as (servers, backends):
        all_up = {f"{a}=up" for a in ENDPOINTS.values()}
        wait_for(lambda: all(votes(srv, site) == all_up for (site, _), srv in servers.items()), 20, 0.05)
        wait_for(lambda: all(a == everyone for a in answers(servers).values()), 10, 0.05)

        # Exactly one probe per cycle per site and endpoint, although two instances of each site run
        before, began = backends.counts(), time.monotonic()
        time.sleep(8 * CHECK_INTERVAL)  # the window the probe rate is counted over
        cycles = (time.monotonic() - began) / CHECK_INTERVAL
        after = backends.counts()
        rates = {key: (after[key] - before[key]) / cycles for key in after}
        assert set(rates) == {(a, s) for a in ENDPOINTS.values() for s in SITES}
        assert all(0.7 <= rate <= 1.3 for rate in rates.values()), rates  # not 2: the lock, per site

        # One site (us) sees eu's endpoint down: both us instances vote it down, every instance of every
        # site keeps answering it
        backends.fail(eu_endpoint, "us")
        down_at_us = (all_up - {f"{eu_endpoint}=up"}) | {f"{eu_endpoint}=down"}
        wait_for(lambda: all(votes(servers[("us", h)], "us") == down_at_us for h in INSTANCES["us"]), 5, 0.02)
        held = time.monotonic() + (FALL + 1) * CHECK_INTERVAL + 2 * PEER_INTERVAL
        checked = 0
        while time.monotonic() < held:
            for key, answer in answers(servers).items():
                assert answer == everyone, f"{key} answered {answer} on one site's vote"
                checked += 1
        assert all(votes(servers[("eu", h)], "eu") == all_up for h in INSTANCES["eu"])  # the owner: up

        # A second site (ap) sees it down too: it leaves every instance's answers at every site
        began = time.monotonic()
        backends.fail(eu_endpoint, "ap")
        took = wait_for(
            lambda: all(a == everyone - {eu_endpoint} for a in answers(servers).values()), VOTE_BOUND, 0.02
        )
        for site in ("us", "ap"):
            assert {votes(servers[(site, h)], site) == down_at_us for h in INSTANCES[site]} == {True}

        backends.heal()
        back = wait_for(lambda: all(a == everyone for a in answers(servers).values()), VOTE_BOUND, 0.02)
    print(
        f"\nprobes per cycle per (endpoint, site): {min(rates.values()):.2f}-{max(rates.values()):.2f};"
        f" one site's vote: {checked} answers of 6 instances kept all three; two sites' votes: out of"
        f" every instance's answer after {took:.2f} s (bound {VOTE_BOUND:g} s), back {back:.2f} s after"
        f" the heal; {time.monotonic() - began:.1f} s"
    )
