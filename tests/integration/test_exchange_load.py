"""1,000 services x 5 peers per interval must not delay answers.

A "hub" site polls five peers (p1..p5) for 1,000 services every 2 s: 5 x 2,001 queries per interval. The
five peers are one real gslbd process (site p1) listed five times, so the hub does all the work of
polling five sites. While the hub polls, a client asks it questions and the answer times are measured.
"""

from __future__ import annotations

import statistics
import time
import urllib.request
from pathlib import Path

import dns.message
import dns.query
import dns.rdatatype
from exchange_sites import HOSTS, ZONE, ms, start_site, wait_for
from gslbd_harness import free_port

SERVICES = 1000
PEERS = ("p1", "p2", "p3", "p4", "p5")
INTERVAL = 2.0


def address(n: int) -> str:
    return f"10.{n // 250}.{n % 250}.1"


def zone_block() -> str:
    return f"""\
zones:
  - origin: {ZONE}
    ttl: 5
    nameservers:
      - {{name: ns1.{ZONE}, address: 127.0.0.2}}
"""


def source_config(port: int) -> str:
    services = "\n".join(
        f"  - {{name: s{n}, endpoints: [{{address: {address(n)}, site: p1}}]}}" for n in range(SERVICES)
    )
    return f"""\
site: {{name: p1}}
dns: {{listen: ["{HOSTS["us"]}:{port}"], lame_duck: 0s}}
{zone_block()}services:
{services}
"""


def hub_config(port: int, api_port: int) -> str:
    services = "\n".join(f"  - {{name: s{n}}}" for n in range(SERVICES))
    peers = "\n".join(f'    - {{name: {p}, nameservers: ["{HOSTS["us"]}:{port}"]}}' for p in PEERS)
    return f"""\
site: {{name: hub}}
dns: {{listen: ["{HOSTS["eu"]}:{port}"], lame_duck: 0s}}
api: {{listen: "{HOSTS["eu"]}:{api_port}"}}
{zone_block()}services:
{services}
peers:
  interval: {ms(INTERVAL)}
  timeout: 1s
  stale_after: 30s
  notify: false
  sites:
{peers}
"""


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks of 1/100 s


def polls(api: str) -> int:
    """Complete polls of all peers so far, from the hub's /metrics."""
    with urllib.request.urlopen(f"{api}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("gslbd_exchange_peer_polls_total{") and 'result="ok"' in line
    )


def test_polling_1000_services_of_5_peers_does_not_delay_answers(tmp_path: Path) -> None:
    workdir = tmp_path
    port = free_port((HOSTS["eu"], HOSTS["us"]))
    api_port = free_port((HOSTS["eu"],))
    api = f"http://{HOSTS['eu']}:{api_port}"
    source = start_site(workdir, "us", source_config(port), port)
    try:
        hub = start_site(workdir, "eu", hub_config(port, api_port), port)
        try:
            learned = wait_for(lambda: len(hub.ask("s999.gslb.test.").answer) == 1, 30)
            print(f"\nhub learned 1000 services from 5 peers {learned:.2f} s after start")
            # Every peer answered and the hub answers every service from what it learned.
            assert [rd.to_text() for rrset in hub.ask("s0.gslb.test.").answer for rd in rrset] == [address(0)]
            query = dns.message.make_query("s500.gslb.test.", dns.rdatatype.A)
            polls0, cpu0, wall0 = polls(api), cpu_seconds(hub.proc.pid), time.monotonic()
            times: list[float] = []
            while time.monotonic() - wall0 < 3 * INTERVAL:
                began = time.perf_counter()
                reply = dns.query.udp(query, HOSTS["eu"], port=port, timeout=2)
                times.append(time.perf_counter() - began)
                assert [rd.to_text() for rrset in reply.answer for rd in rrset] == [address(500)]
                time.sleep(0.005)
            cpu = (cpu_seconds(hub.proc.pid) - cpu0) / (time.monotonic() - wall0)
            done = polls(api) - polls0
            times.sort()
            p50, p99, worst = statistics.median(times), times[int(len(times) * 0.99)], times[-1]
            print(
                f"hub polling 5 peers x {2 * SERVICES + 1} queries every {INTERVAL:g} s ({done} complete "
                f"polls in the window): {len(times)} answers, p50 {p50 * 1000:.2f} ms, "
                f"p99 {p99 * 1000:.2f} ms, max {worst * 1000:.2f} ms; hub CPU {cpu * 100:.0f}% of one core"
            )
            assert done >= 2 * len(PEERS)  # every peer polled at least twice in 3 intervals
            assert p99 < 0.1  # a poll never holds the loop: answers are not queued behind it
            log = hub.log()
            assert "does not answer" not in log, log[-2000:]
            for peer in PEERS:
                assert f"peer {peer} is fresh" in log
        finally:
            hub.kill()
    finally:
        source.kill()
