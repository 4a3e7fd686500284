"""Several gslbd sites on 127.0.0.2-4 (one DNS port for all), peers of each other, for exchange tests.

    with running_sites(tmp_path, configs, port) as sites:   # configs: site -> YAML text
        sites["eu"].ask("app.gslb.test.")

`site_config` writes a typical site: zone gslb.test. with k8gb-style NS names for every site, the given
services block, and `peers` listing every other site at its host (or `discover: ns`).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import dns.rdatatype
from gslbd_harness import Running, free_port, gslbd_command, wait_until_answering

ZONE = "gslb.test."
HOSTS = {"eu": "127.0.0.2", "us": "127.0.0.3", "ap": "127.0.0.4"}
TOKEN = "exchange-test-token"  # the admin API token of sites whose `extra` sets one


def sites_port(sites: tuple[str, ...] = ("eu", "us", "ap")) -> int:
    """A port free for UDP and TCP on every site's host."""
    return free_port(tuple(HOSTS[s] for s in sites))


def ms(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def site_config(
    site: str,
    port: int,
    services: str,
    *,
    sites: tuple[str, ...] = ("eu", "us", "ap"),
    interval: float = 1.0,
    stale_after: float = 3.0,
    timeout: float = 0.3,
    notify: bool = True,
    discover: bool = False,
    extra: str = "",
    zone_extra: str = "",
    hosts: Mapping[str, str] = HOSTS,
) -> str:
    """One site's config. `services` is the YAML list under `services:` (indented by two spaces);
    `zone_extra`: more keys of the zone (indented by four spaces, e.g. its `dnssec`); `hosts`: each
    site's address (default HOSTS, on loopback)."""
    ns = "\n".join(f"      - {{name: gslb-ns-{s}-gslb.test., address: {hosts[s]}}}" for s in sites)
    if discover:
        peer_lines = f"  discover: ns\n  port: {port}"
    else:
        listed = "\n".join(
            f'    - {{name: {p}, nameservers: ["{hosts[p]}:{port}"]}}' for p in sites if p != site
        )
        peer_lines = f"  sites:\n{listed}"
    localities = "\n".join(f"  {s}: {{locality: {{region: region-{s}}}}}" for s in sites)
    return f"""\
site: {{name: {site}}}
dns: {{listen: ["{hosts[site]}:{port}"], lame_duck: 0s}}
zones:
  - origin: {ZONE}
    ttl: 5
{zone_extra}    nameservers:
{ns}
sites:
{localities}
services:
{services}
peers:
  interval: {ms(interval)}
  stale_after: {ms(stale_after)}
  timeout: {ms(timeout)}
  notify: {"true" if notify else "false"}
{peer_lines}
{extra}"""


def start_site(workdir: Path, site: str, config_text: str, port: int) -> Running:
    """Start `python -m gslbd serve` for one site and wait until it answers SOA."""
    config_path = workdir / f"{site}.yaml"
    config_path.write_text(config_text)
    log_path = workdir / f"{site}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            gslbd_command("serve", "--config", str(config_path), "--log-level", "info"),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Running(proc, port, (HOSTS[site],), config_path, log_path, ZONE)
    wait_until_answering(server)
    return server


@contextlib.contextmanager
def running_sites(workdir: Path, configs: dict[str, str], port: int) -> Iterator[dict[str, Running]]:
    """Every site of `configs` running (killed on exit)."""
    started: dict[str, Running] = {}
    try:
        for site, text in configs.items():
            started[site] = start_site(workdir, site, text, port)
        yield started
    finally:
        for server in started.values():
            server.kill()


def addresses(server: Running, name: str, rtype: str = "A") -> set[str]:
    """The addresses of the answer to (name, rtype); empty for NXDOMAIN/NODATA."""
    reply = server.ask(name, rtype)
    want = dns.rdatatype.from_text(rtype)
    return {rd.to_text() for rrset in reply.answer if rrset.rdtype == want for rd in rrset}


def wait_for(check: Callable[[], bool], timeout: float, step: float = 0.01) -> float:
    """Poll `check` until it is true; the seconds it took. AssertionError after `timeout`."""
    began = time.monotonic()
    while True:
        if check():
            return time.monotonic() - began
        if time.monotonic() - began > timeout:
            raise AssertionError(f"not true within {timeout}s")
        time.sleep(step)


def api_url(site: str, port: int) -> str:
    return f"http://{HOSTS[site]}:{port}"


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def set_admin(url: str, service: str, address: str, state: str) -> None:
    """Set an endpoint's admin state through a site's API (token TOKEN)."""
    request = urllib.request.Request(
        f"{url}/api/v1/services/{service}/endpoints/{address}/admin",
        data=json.dumps({"state": state}).encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200


def metric(url: str, prefix: str) -> float:
    """The sum of the samples of a site's /metrics whose line starts with `prefix` (0 when none)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))
