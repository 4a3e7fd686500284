"""`gslbd audit` and the periodic audit against two real gslbd sites on 127.0.0.2 and 127.0.0.3 that
exchange health: sites that agree exit 0; an endpoint forced down by an admin at one site, or a service
configured differently at one site, is named and exits 1; `audit:` in the config exports the per-peer
gauge on /metrics."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from exchange_sites import (
    HOSTS,
    TOKEN,
    addresses,
    api_url,
    metric,
    running_sites,
    set_admin,
    site_config,
    sites_port,
    wait_for,
)
from gslbd_harness import Running, free_port, gslbd_command

SITES = ("eu", "us")
EU, US = "192.0.2.1", "198.51.100.1"
TOPOLOGY = """\
topology:
  networks:
    - {cidr: 10.1.0.0/16, site: eu}
    - {cidr: 10.2.0.0/16, site: us}
"""


RANDOM = "random"
US_FIRST = "failover\n    failover_order: [us, eu]"


def services(drift: str = RANDOM) -> str:
    return f"""\
  - name: app
    policy: failover
    failover_order: [eu, us]
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: {US}, site: us}}
  - name: near
    policy: geo
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: {US}, site: us}}
  - name: all
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: "2001:db8::1", site: eu}}
      - {{address: {US}, site: us}}
  - name: drift
    policy: {drift}
    endpoints:
      - {{address: 192.0.2.50, site: eu}}
      - {{address: 198.51.100.50, site: us}}
"""


Sites = tuple[dict[str, Running], dict[str, str], dict[str, Path], int]


def _configs(port: int, apis: dict[str, str], drift_at_us: str) -> dict[str, str]:
    return {
        s: site_config(
            s,
            port,
            services(drift_at_us if s == "us" else RANDOM),
            sites=SITES,
            interval=1.0,
            stale_after=3.0,
            timeout=0.3,
            extra=TOPOLOGY
            + f'api: {{listen: "{apis[s].removeprefix("http://")}", token: {TOKEN}}}\n'
            + "audit: {every: 1s, sample: 0}\n",
        )
        for s in SITES
    }


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    port = sites_port(SITES)
    apis = {s: api_url(s, free_port((HOSTS[s],))) for s in SITES}
    workdir = tmp_path_factory.mktemp("audit")
    with running_sites(workdir, _configs(port, apis, RANDOM), port) as running:
        yield running, apis, {s: workdir / f"{s}.yaml" for s in SITES}, port


def audit(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gslbd_command("audit", "--config", str(config), *args),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_sites_that_agree_pass_the_audit_with_exit_0(sites: Sites) -> None:
    _, _, configs, _ = sites
    done = audit(configs["eu"])
    assert done.returncode == 0, done.stdout + done.stderr
    # 4 services; app, near, drift ask A, all asks A and AAAA: 5 types x 3 client networks
    assert done.stdout.strip() == "15 questions asked of eu, us: 0 divergent services"


def test_an_endpoint_forced_down_at_one_site_is_named_with_both_answer_sets(sites: Sites) -> None:
    _, apis, configs, _ = sites
    set_admin(apis["us"], "app.gslb.test.", EU, "down")
    try:
        done = audit(configs["eu"], "--json")
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stdout, done.stderr
        report = json.loads(done.stdout)
        assert report["divergent_services"] == ["app.gslb.test."]
        assert report["divergent_services_per_peer"] == {"us": 1}
        rows = {
            (r["client_network"], tuple(r["answer_a"]), tuple(r["answer_b"])) for r in report["divergences"]
        }
        assert rows == {(net, (f"A {EU}",), (f"A {US}",)) for net in (None, "10.1.0.0/16", "10.2.0.0/16")}
        text = audit(configs["eu"])
        assert text.returncode == 1
        assert text.stdout.startswith("app.gslb.test.\n  client network  type  eu         site  answer\n")
        assert f"  (no ECS)        A     {EU}  us    {US}\n" in text.stdout
    finally:
        set_admin(apis["us"], "app.gslb.test.", EU, "obey")
    assert audit(configs["eu"]).returncode == 0


def _reconfigure_us(sites: Sites, drift: str) -> None:
    """Rewrite the us site's config with `drift` as the policy of the service drift, reload it (SIGHUP)
    and wait until it answers so (failover: us's endpoint alone; random: both)."""
    running, apis, configs, port = sites
    configs["us"].write_text(_configs(port, apis, drift)["us"])
    running["us"].proc.send_signal(signal.SIGHUP)
    want = {"198.51.100.50"} if drift == US_FIRST else {"192.0.2.50", "198.51.100.50"}
    wait_for(lambda: addresses(running["us"], "drift.gslb.test.") == want, timeout=10)


def test_a_service_configured_differently_at_one_site_is_named_and_exits_1(sites: Sites) -> None:
    _, _, configs, _ = sites
    _reconfigure_us(sites, US_FIRST)
    try:
        done = audit(configs["eu"], "--json")
        assert done.returncode == 1, done.stdout + done.stderr
        report = json.loads(done.stdout)
        assert report["divergent_services"] == ["drift.gslb.test."]
        # random at eu: both endpoints; failover at us: us's own, for every client network
        assert {(tuple(r["answer_a"]), tuple(r["answer_b"])) for r in report["divergences"]} == {
            (("A 192.0.2.50", "A 198.51.100.50"), ("A 198.51.100.50",))
        }
        assert len(report["divergences"]) == 3
    finally:
        _reconfigure_us(sites, RANDOM)
    assert audit(configs["eu"]).returncode == 0


def test_a_sample_audits_that_many_services_drawn_by_the_seed(sites: Sites) -> None:
    _, _, configs, _ = sites
    first = audit(configs["eu"], "--sample", "2", "--seed", "7", "--json")
    again = audit(configs["eu"], "--sample", "2", "--seed", "7", "--json")
    assert first.returncode == again.returncode == 0, first.stderr
    assert json.loads(first.stdout)["questions"] == json.loads(again.stdout)["questions"]
    assert json.loads(first.stdout)["questions"] < 15


def test_the_periodic_audit_exports_its_runs_and_divergent_services_per_peer(sites: Sites) -> None:
    _, apis, _, _ = sites
    wait_for(lambda: metric(apis["eu"], "gslbd_audit_runs_total") >= 1, timeout=15)
    wait_for(lambda: 'gslbd_audit_divergent_services{peer="us"} 0.0' in _metrics(apis["eu"]), timeout=15)
    set_admin(apis["us"], "near.gslb.test.", EU, "down")  # geo: clients of 10.1/16 now get US at us
    try:
        wait_for(lambda: metric(apis["eu"], 'gslbd_audit_divergent_services{peer="us"}') == 1, timeout=15)
        wait_for(lambda: metric(apis["us"], 'gslbd_audit_divergent_services{peer="eu"}') == 1, timeout=15)
    finally:
        set_admin(apis["us"], "near.gslb.test.", EU, "obey")
    wait_for(lambda: metric(apis["eu"], 'gslbd_audit_divergent_services{peer="us"}') == 0, timeout=15)


def _metrics(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        return str(response.read().decode())
