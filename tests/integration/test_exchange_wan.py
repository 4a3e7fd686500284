"""Per-name polling across a WAN: three real sites, 1,000 services, 120 ms one-way between every two.

Each site (eu, us, ap on 127.0.0.2-4) polls the other two name by name (`peers.transfer: false`, as a
k8gb-style peer is polled): 2,001 questions per peer per interval. The sites reach each other only through
a DelayProxy (delay_proxy.py) that adds 120 ms each way: a site's peers are configured at their "far"
addresses 127.0.0.12-14, and the proxy sends from the asker's far address, so NOTIFY sources still match.
"""

from __future__ import annotations

import contextlib
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from delay_proxy import DelayProxy
from exchange_sites import HOSTS, ZONE, metric, ms, start_site, wait_for
from gslbd_harness import Running, free_port

SERVICES = 1000
SITES = ("eu", "us", "ap")
FAR = {"eu": "127.0.0.12", "us": "127.0.0.13", "ap": "127.0.0.14"}
DELAY = 0.120  # one way
INTERVAL = 3.0
OWN = {"eu": 1, "us": 2, "ap": 3}  # the last octet of each site's endpoints


def address(n: int, site: str) -> str:
    return f"10.{n // 250}.{n % 250}.{OWN[site]}"


def config(site: str, port: int, api_port: int, notify: bool) -> str:
    lines = []
    for n in range(SERVICES):
        endpoints = ", ".join(f"{{address: {address(n, s)}, site: {s}}}" for s in SITES)
        lines.append(f"  - {{name: s{n}, endpoints: [{endpoints}]}}")
    services = "\n".join(lines)
    peers = "\n".join(f'    - {{name: {p}, nameservers: ["{FAR[p]}:{port}"]}}' for p in SITES if p != site)
    return f"""\
site: {{name: {site}}}
dns: {{listen: ["{HOSTS[site]}:{port}"], lame_duck: 0s}}
api: {{listen: "{HOSTS[site]}:{api_port}"}}
zones:
  - origin: {ZONE}
    ttl: 5
    nameservers:
      - {{name: ns1.{ZONE}, address: {HOSTS[site]}}}
services:
{services}
peers:
  interval: {ms(INTERVAL)}
  timeout: 2s
  stale_after: 60s
  notify: {"true" if notify else "false"}
  transfer: false
  sites:
{peers}
"""


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


@contextlib.contextmanager
def wan(workdir: Path, notify: bool) -> Iterator[tuple[dict[str, Running], dict[str, str], DelayProxy]]:
    """The three sites behind the proxy; (sites, their API URLs, the proxy). Sites are killed on exit."""
    port = free_port(tuple(HOSTS[s] for s in SITES) + tuple(FAR.values()))
    api_port = free_port(tuple(HOSTS[s] for s in SITES))
    routes = {(FAR[s], port): (HOSTS[s], port) for s in SITES}
    sources = {HOSTS[s]: FAR[s] for s in SITES}
    apis = {s: f"http://{HOSTS[s]}:{api_port}" for s in SITES}
    started: dict[str, Running] = {}
    with DelayProxy(routes, DELAY, sources) as proxy:
        try:
            for site in SITES:
                started[site] = start_site(workdir, site, config(site, port, api_port, notify), port)
            yield started, apis, proxy
        finally:
            for server in started.values():
                server.kill()


def learned(api: str) -> float:
    """Endpoint addresses a site has learned from its peers (fresh ones only)."""
    return metric(api, "gslbd_exchange_peer_endpoints{")


def polls(api: str, result: str) -> float:
    """A site's polls of its peers with `result` (ok or failed)."""
    with urllib.request.urlopen(f"{api}/metrics", timeout=5) as response:
        lines = response.read().decode().splitlines()
    return sum(
        float(line.split()[-1])
        for line in lines
        if line.startswith("gslbd_exchange_peer_polls_total{") and f'result="{result}"' in line
    )


def test_per_name_polling_of_1000_services_converges_across_a_wan_within_two_intervals(
    tmp_path: Path,
) -> None:
    with wan(tmp_path, notify=False) as (sites, apis, proxy):
        last_started = time.monotonic()
        # every site learns both peers' 1,000 addresses within two intervals of the last site's start
        took = wait_for(lambda: all(learned(apis[s]) == 2 * SERVICES for s in SITES), 2 * INTERVAL, 0.05)
        print(
            f"\n3 sites x 2 peers x {2 * SERVICES + 1} questions, {DELAY * 1000:.0f} ms one way: converged "
            f"{took:.2f} s after the last site answered ({proxy.tcp_connections} TCP connections)"
        )
        assert time.monotonic() - last_started <= 2 * INTERVAL + 0.5  # the last metrics reads
        answer = sites["eu"].ask("s999.gslb.test.")
        assert {rd.to_text() for rrset in answer.answer for rd in rrset} == {address(999, s) for s in SITES}
        # steady state: every poll completes, over the connections of the first polls
        ok0 = {s: polls(apis[s], "ok") for s in SITES}
        # (polls before every site had started failed: they are not counted)
        failed0 = {s: polls(apis[s], "failed") for s in SITES}
        errors0 = {s: metric(apis[s], "gslbd_exchange_peer_query_errors_total{") for s in SITES}
        cpu0 = {s: cpu_seconds(sites[s].proc.pid) for s in SITES}
        connections0, began = proxy.tcp_connections, time.monotonic()
        wait_for(lambda: all(polls(apis[s], "ok") >= ok0[s] + 4 for s in SITES), 3 * INTERVAL, 0.1)
        spent = time.monotonic() - began
        cpu = {s: (cpu_seconds(sites[s].proc.pid) - cpu0[s]) / spent for s in SITES}
        # a query that failed and was answered on its retry is counted, not a failure (a loaded machine)
        errors = {s: metric(apis[s], "gslbd_exchange_peer_query_errors_total{") - errors0[s] for s in SITES}
        print(
            f"steady state: {spent:.1f} s, CPU per site (polling 2 peers and answering their polls): "
            + ", ".join(f"{s} {c * 100:.0f}%" for s, c in cpu.items())
            + f" of a core; {proxy.tcp_connections - connections0} new TCP connections; query errors {errors}"
        )
        for s in SITES:
            assert polls(apis[s], "failed") == failed0[s], sites[s].log()[-2000:]
            assert metric(apis[s], "gslbd_exchange_peer_stale{") == 0
            # the mean of the two peers: the path's round trip (the proxy holds a new connection's first
            # bytes for the handshake's round trip, so the first sample is two round trips)
            rtt = metric(apis[s], "gslbd_exchange_peer_rtt_seconds{") / 2
            assert 2 * DELAY <= rtt < 4 * DELAY + 0.1, rtt
        assert proxy.tcp_connections == connections0
