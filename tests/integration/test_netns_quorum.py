"""peers.quorum under real partitions: three gslbd sites in network namespaces of their own
(netns_support), 40/90/120 ms one-way links, every site's endpoint checked over HTTP from every site
(`votes: 2`). k8gb's S1 (one site cut off from both peers) and S4 (one way: us cannot reach eu, eu still
reaches us), with the answers of every site checked throughout. The figures are printed for
docs/multisite-scenarios.md:

    pytest -p no:cacheprovider tests/integration/test_netns_quorum.py -s
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rdatatype
import pytest
from exchange_sites import ZONE, ms, site_config, wait_for
from gslbd_harness import Running, start_gslbd
from netns_support import Network, netns_unavailable, site_network

pytestmark = pytest.mark.skipif(netns_unavailable() is not None, reason=str(netns_unavailable()))

SITES = ("eu", "us", "ap")
DELAYS = {("eu", "us"): 0.040, ("us", "ap"): 0.090, ("eu", "ap"): 0.120}
DNS_PORT, HTTP_PORT, API_PORT = 53, 8080, 8081
CHECK_INTERVAL, FALL = 1.0, 2
PEER_INTERVAL, STALE_AFTER, PEER_TIMEOUT = 1.0, 10.0, 0.7
# A site lost: FALL failed probes at two sites (each up to its 900 ms timeout: eu-ap is 240 ms a round
# trip and an HTTP probe takes two), then one vote over the slowest link (NOTIFY + IXFR, or the next
# poll): three intervals and a second for a busy machine.
LOST_BOUND = (FALL + 1) * CHECK_INTERVAL + PEER_INTERVAL + 1.0
RR, FO = f"rr.{ZONE}", f"fo.{ZONE}"


def services(net: Network) -> str:
    listed = "\n".join(f"      - {{address: {net.address(s)}, site: {s}, check: web}}" for s in SITES)
    return f"""\
  - name: rr
    endpoints:
{listed}
  - name: fo
    policy: failover
    failover_order: [eu, us, ap]
    endpoints:
{listed}
"""


CHECKS = (
    f"checks:\n  web: {{type: http, port: {HTTP_PORT}, interval: {ms(CHECK_INTERVAL)}, timeout: 900ms, "
    f"rise: 1, fall: {FALL}}}\n"
)


@dataclass
class Sites:
    net: Network
    workdir: Path
    servers: dict[str, Running] = field(default_factory=dict)
    backends: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def answer(self, site: str, name: str) -> set[str] | None:
        """The addresses `site` answers for `name`, asked inside its namespace (None: no answer in time)."""
        query = dns.message.make_query(name, dns.rdatatype.A)
        query.flags = 0
        sock = self.net.socket_in(site)
        with sock:
            try:
                reply = dns.query.udp(query, self.net.address(site), port=DNS_PORT, timeout=0.5, sock=sock)
            except (dns.exception.Timeout, OSError):
                return None
        return {rd.to_text() for rrset in reply.answer if rrset.rdtype == dns.rdatatype.A for rd in rrset}

    def votes(self, site: str) -> set[str] | None:
        """The votes `site` publishes on `rr` (TXT at rr.votes.<its exchange apex>), asked there."""
        query = dns.message.make_query(f"rr.votes._gslbd-exchange-{site}.{ZONE}", dns.rdatatype.TXT)
        query.flags = 0
        sock = self.net.socket_in(site)
        with sock:
            try:
                reply = dns.query.udp(query, self.net.address(site), port=DNS_PORT, timeout=0.5, sock=sock)
            except (dns.exception.Timeout, OSError):
                return None
        return {rd.strings[0].decode() for rrset in reply.answer for rd in rrset}

    def downs(self, site: str) -> float | None:
        """How many down votes `site` holds now, its own and those it heard (its metrics, asked there)."""
        url = f"http://{self.net.address(site)}:{API_PORT}/metrics"
        with self.net.entered(site):
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    text = response.read().decode()
            except OSError:
                return None
        lines = [line for line in text.splitlines() if line.startswith("gslbd_quorum_votes{")]
        return sum(float(line.split()[-1]) for line in lines if 'verdict="down"' in line)

    def agreed(self) -> None:
        """Wait until every site votes every endpoint up and has heard every other site say so (a
        scenario starts from the agreed picture: a vote cast in the previous one may still be down for
        a probe interval, or not yet heard)."""
        want = {f"{self.net.address(s)}=up" for s in SITES}
        wait_for(lambda: all(self.votes(s) == want for s in SITES), 10, step=0.05)
        wait_for(lambda: all(self.downs(s) == 0 for s in SITES), 10, step=0.05)

    def start_backend(self, site: str) -> None:
        argv = [sys.executable, "-m", "http.server", "--bind", self.net.address(site), str(HTTP_PORT)]
        argv += ["--directory", str(self.workdir)]
        self.backends[site] = self.net.popen(site, argv, self.workdir / f"backend-{site}.log")


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    workdir = tmp_path_factory.mktemp("netns-quorum")
    with site_network(SITES, DELAYS, seed=23) as net:
        hosts = {s: net.address(s) for s in SITES}
        state = Sites(net, workdir)
        for site in SITES:
            state.start_backend(site)
        try:
            for site in SITES:
                text = site_config(
                    site,
                    DNS_PORT,
                    services(net),
                    interval=PEER_INTERVAL,
                    stale_after=STALE_AFTER,
                    timeout=PEER_TIMEOUT,
                    extra=CHECKS + f'api: {{listen: "{hosts[site]}:{API_PORT}"}}\n',
                    hosts=hosts,
                ).replace("peers:\n", "peers:\n  quorum: {votes: 2}\n", 1)
                with net.entered(site):
                    state.servers[site] = start_gslbd(
                        workdir, text, zone=ZONE, hosts=(hosts[site],), name=site, port=DNS_PORT,
                        extra_args=("--log-level", "info"),
                    )  # fmt: skip
            everyone = set(hosts.values())
            wait_for(lambda: all(state.answer(s, RR) == everyone for s in SITES), 30, step=0.05)
            yield state
        finally:
            for server in state.servers.values():
                server.kill()


def holds(sites: Sites, seconds: float, want: dict[str, dict[str, set[str]]]) -> int:
    """Every site answers `want[site][name]` at every check for `seconds` (an unanswered query is
    retried at the next check); the number of answers checked."""
    end, checked = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for site, names in want.items():
            for name, expected in names.items():
                got = sites.answer(site, name)
                if got is not None:
                    assert got == expected, f"{site} answered {name} with {got}, not {expected}"
                    checked += 1
        time.sleep(0.02)  # pacing, as wait_for's step: the link emulator shares this process
    return checked


def test_s1_a_site_cut_off_fails_static_and_the_others_drop_it_by_their_votes(sites: Sites) -> None:
    sites.agreed()
    net = sites.net
    eu, us, ap = (net.address(s) for s in SITES)
    everyone = {eu, us, ap}
    began = time.monotonic()
    net.isolate("eu")
    try:
        took = {
            s: wait_for(lambda s=s: sites.answer(s, RR) == {us, ap}, LOST_BOUND, step=0.02)
            for s in ("us", "ap")
        }
        lost = time.monotonic() - began
        assert all(sites.answer(s, FO) == {us} for s in ("us", "ap"))
        # eu hears nobody: partitioned, it keeps the agreed picture past stale_after instead of its own view
        wait_for(lambda: "partitioned: this site hears 1 of 3" in sites.servers["eu"].log(), 5)
        checked = holds(sites, STALE_AFTER + 2 * PEER_INTERVAL, {"eu": {RR: everyone, FO: {eu}}})
        assert checked > 20
    finally:
        net.heal()
    healed = wait_for(lambda: all(sites.answer(s, RR) == everyone for s in SITES), 10, step=0.05)
    assert "no longer partitioned" in sites.servers["eu"].log()
    print(
        f"\nS1 eu cut off: us dropped eu's endpoint after {took['us']:.2f} s, ap after {lost:.2f} s"
        f" (bound {LOST_BOUND:g} s, stale_after {STALE_AFTER:g} s); eu kept all three for"
        f" {STALE_AFTER + 2 * PEER_INTERVAL:g} s; after the heal every site answered all three in"
        f" {healed:.2f} s"
    )


def test_s4_one_way_failure_takes_nothing_out_anywhere(sites: Sites) -> None:
    sites.agreed()
    net = sites.net
    eu, us, ap = (net.address(s) for s in SITES)
    everyone = {eu, us, ap}
    net.link("us", "eu").cut("us", "eu")  # us -> eu dropped; eu -> us still passes
    try:
        # us's probes of eu fail and eu's of us (their replies are lost): one vote each, never two
        checked = holds(
            sites,
            (FALL + 3) * CHECK_INTERVAL + 2 * PEER_INTERVAL,
            {s: {RR: everyone, FO: {eu}} for s in SITES},
        )
        assert checked > 30
    finally:
        net.heal()
    print(f"\nS4 us cannot reach eu: every site answered all three and eu for fo in {checked} checks")


def test_s2_one_link_down_takes_nothing_out_past_stale_after(sites: Sites) -> None:
    sites.agreed()
    net = sites.net
    eu, us, ap = (net.address(s) for s in SITES)
    everyone = {eu, us, ap}
    net.link("eu", "us").down()  # eu and us cannot reach each other; both reach ap
    try:
        # eu votes us's endpoint down and us eu's; ap sees both up: one vote each. Past stale_after
        # eu and us judge each other stale, and the votes of the sites they hear still keep them.
        seconds = STALE_AFTER + 2 * PEER_INTERVAL
        checked = holds(sites, seconds, {s: {RR: everyone, FO: {eu}} for s in SITES})
        assert checked > 30
    finally:
        net.heal()
    print(
        f"\nS2 eu-us down: every site answered all three and eu for fo for {seconds:g} s ({checked} checks)"
    )


def test_s3_total_partition_every_site_fails_static(sites: Sites) -> None:
    sites.agreed()
    net = sites.net
    eu, us, ap = (net.address(s) for s in SITES)
    everyone = {eu, us, ap}
    said = "partitioned: this site hears 1 of 3"
    before = {s: sites.servers[s].log().count(said) for s in SITES}
    for link in net.links.values():
        link.down()
    try:
        for site in SITES:  # each hears 1 of 3 sites, and says so once more
            log, was = sites.servers[site].log, before[site]
            wait_for(lambda log=log, was=was: log().count(said) > was, 5)  # type: ignore[misc]
        seconds = STALE_AFTER + 2 * PEER_INTERVAL
        checked = holds(sites, seconds, {s: {RR: everyone, FO: {eu}} for s in SITES})
        assert checked > 30
    finally:
        net.heal()
    healed = wait_for(lambda: all(sites.answer(s, RR) == everyone for s in SITES), 10, step=0.05)
    print(
        f"\nS3 total partition: every site partitioned, answered all three and eu for fo for {seconds:g} s"
        f" ({checked} checks); {healed:.2f} s after the heal all three everywhere"
    )
