"""The bulk exchange channel between real gslbd sites: each site's exchange zone, polled by its SOA serial
and transferred by IXFR/AXFR under the shared TSIG key; per-name polling for a site without it.

eu and us serve their exchange zones (us keeps a journal of one step only); ap has `peers.transfer:
false`, so it neither serves one nor asks for one: eu and us poll it name by name, as a k8gb peer.
Checked with the sites' answers, their metrics, `dig AXFR`/`dig IXFR=N`, and BIND's named as a secondary
of eu's exchange zone (transferring from us's address with the key).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from bind_harness import key_statement, running_bind
from exchange_sites import (
    HOSTS,
    TOKEN,
    ZONE,
    addresses,
    api_url,
    metric,
    running_sites,
    set_admin,
    site_config,
    sites_port,
    wait_for,
)
from gslbd_harness import Running, free_port

pytestmark = pytest.mark.integration

SECRET = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
KEY = f"hmac-sha256:gslb-exchange:{SECRET}"
EU, US, AP = "192.0.2.1", "198.51.100.1", "203.0.113.1"
SERVICES = f"""\
  - name: all
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: "2001:db8::1", site: eu}}
      - {{address: {US}, site: us}}
      - {{address: {AP}, site: ap}}
  - name: app
    endpoints:
      - {{address: 192.0.2.7, site: eu}}
      - {{address: 198.51.100.7, site: us}}
"""
EXTRA = {"eu": "", "us": "  journal: 1\n", "ap": "  transfer: false\n"}
Sites = tuple[dict[str, Running], dict[str, str]]


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    port = sites_port()
    apis = {s: api_url(s, free_port((HOSTS[s],))) for s in HOSTS}
    configs = {}
    for site in HOSTS:
        text = site_config(site, port, SERVICES, interval=1.0, stale_after=5.0, timeout=0.3)
        peers = f"  tsig: {{name: gslb-exchange, secret: {SECRET}}}\n" + EXTRA[site]
        api = f'api: {{listen: "{apis[site].removeprefix("http://")}", token: {TOKEN}}}\n'
        configs[site] = text.rstrip("\n") + "\n" + peers + api
    with running_sites(tmp_path_factory.mktemp("xfr"), configs, port) as running:
        for server in running.values():
            wait_for(lambda server=server: addresses(server, f"all.{ZONE}") == {EU, US, AP}, 10)
        yield running, apis


def channel_polls(api: str, peer: str, kind: str) -> float:
    return metric(api, f'gslbd_exchange_peer_channel_polls_total{{kind="{kind}",peer="{peer}"}}')


def served(api: str, kind: str) -> float:
    return metric(api, f'gslbd_exchange_transfers_total{{kind="{kind}"}}')


def apex(site: str) -> str:
    return f"_gslbd-exchange-{site}.{ZONE}"


def _site_of(server: Running) -> str:
    return next(site for site, host in HOSTS.items() if host == server.host)


def records(output: str) -> list[tuple[str, str, str]]:
    """(owner, type, data) of each record line of dig's output, in order."""
    out = []
    for line in output.splitlines():
        if not line or line.startswith(";"):
            continue
        parts = line.split(None, 4)
        if len(parts) == 5 and parts[2] == "IN":
            out.append((parts[0], parts[3], parts[4]))
    return out


def serial_of(server: Running) -> int:
    reply = server.ask(apex(_site_of(server)), "SOA")
    return int(reply.answer[0][0].serial)


def test_a_change_reaches_the_peer_by_ixfr_after_one_full_transfer(sites: Sites) -> None:
    running, apis = sites
    assert channel_polls(apis["us"], "eu", "axfr") >= 1  # the first poll copies the whole zone
    before = served(apis["eu"], "ixfr")
    set_admin(apis["eu"], "all.gslb.test", EU, "down")
    try:
        wait_for(lambda: addresses(running["us"], f"all.{ZONE}") == {US, AP}, 5)
        assert served(apis["eu"], "ixfr") > before
        assert channel_polls(apis["us"], "eu", "ixfr") >= 1
    finally:
        set_admin(apis["eu"], "all.gslb.test", EU, "obey")
    wait_for(lambda: addresses(running["us"], f"all.{ZONE}") == {EU, US, AP}, 5)


def test_in_steady_state_a_poll_finds_the_serial_unchanged_and_transfers_nothing(sites: Sites) -> None:
    _, apis = sites
    unchanged = channel_polls(apis["eu"], "us", "unchanged")
    transfers = served(apis["us"], "ixfr") + served(apis["us"], "axfr")
    wait_for(lambda: channel_polls(apis["eu"], "us", "unchanged") >= unchanged + 2, 5)
    assert served(apis["us"], "ixfr") + served(apis["us"], "axfr") == transfers


def test_a_site_without_the_channel_is_polled_name_by_name_and_polls_so(sites: Sites) -> None:
    running, apis = sites
    assert addresses(running["eu"], f"all.{ZONE}") == {EU, US, AP}
    assert channel_polls(apis["eu"], "ap", "per_name") >= 1
    assert channel_polls(apis["eu"], "ap", "unchanged") == 0
    assert channel_polls(apis["ap"], "eu", "per_name") >= 1  # ap does not ask for eu's exchange zone
    assert addresses(running["ap"], f"all.{ZONE}") == {EU, US, AP}
    assert "status: NXDOMAIN" in running["ap"].dig(apex("ap"), "SOA")


def test_dig_axfr_from_a_peer_with_the_key_lists_the_publication(sites: Sites) -> None:
    running, _ = sites
    out = running["eu"].dig("-y", KEY, "-b", HOSTS["us"], "AXFR", apex("eu"))
    got = records(out)
    assert got[0][1] == "SOA" and got[-1][1] == "SOA", out
    assert (f"all.{apex('eu')}", "A", EU) in got
    assert (f"all.{apex('eu')}", "AAAA", "2001:db8::1") in got
    assert (f"app.{apex('eu')}", "A", "192.0.2.7") in got
    assert not any(owner.startswith("all.") and data == US for owner, _, data in got)  # only eu's own


def test_a_transfer_without_the_key_or_from_a_non_peer_is_refused(sites: Sites) -> None:
    running, _ = sites
    unsigned = running["eu"].dig("-b", HOSTS["us"], "AXFR", apex("eu"))
    assert "Transfer failed" in unsigned and not records(unsigned), unsigned
    stranger = running["eu"].dig("-y", KEY, "-b", "127.0.0.1", "AXFR", apex("eu"))
    assert "Transfer failed" in stranger and not records(stranger), stranger
    # the SOA (the serial and the heartbeat) is answered to anyone
    soa = running["eu"].dig("-b", "127.0.0.1", apex("eu"), "SOA")
    assert "status: NOERROR" in soa and re.search(r"heartbeat-eu\.gslb\.test\.\s+0\s+IN\s+TXT", soa), soa


def test_ixfr_is_incremental_within_the_journal_and_the_whole_zone_beyond_it(sites: Sites) -> None:
    running, apis = sites
    us = running["us"]
    first = serial_of(us)
    set_admin(apis["us"], "app.gslb.test", "198.51.100.7", "down")
    try:
        wait_for(lambda: serial_of(us) != first, 5)
        second = serial_of(us)
        set_admin(apis["us"], "app.gslb.test", "198.51.100.7", "obey")
        wait_for(lambda: serial_of(us) != second, 5)
        third = serial_of(us)
    finally:
        set_admin(apis["us"], "app.gslb.test", "198.51.100.7", "obey")
    # us keeps one step: from the second serial, the difference (the endpoint came back)...
    step = records(us.dig("-y", KEY, "-b", HOSTS["eu"], f"IXFR={second}", apex("us")))
    soa = [data.split()[2] for _, rtype, data in step if rtype == "SOA"]
    assert soa == [str(third), str(second), str(third), str(third)], step
    assert [(o, t, d) for o, t, d in step if t == "A"] == [(f"app.{apex('us')}", "A", "198.51.100.7")]
    # ...from the first, which the journal no longer reaches, the whole zone
    whole = records(us.dig("-y", KEY, "-b", HOSTS["eu"], f"IXFR={first}", apex("us")))
    assert [t for _, t, _ in whole][:2] != ["SOA", "SOA"], whole
    assert (f"all.{apex('us')}", "A", US) in whole and (f"app.{apex('us')}", "A", "198.51.100.7") in whole
    current = records(us.dig("-y", KEY, "-b", HOSTS["eu"], f"IXFR={third}", apex("us")))
    assert [t for _, t, _ in current] == ["SOA"], current


def test_a_bind_secondary_copies_the_exchange_zone_and_follows_a_change_by_ixfr(
    sites: Sites, tmp_path: Path
) -> None:
    running, apis = sites
    eu = running["eu"]
    zone = apex("eu").rstrip(".")
    secondary = f"""\
{key_statement("gslb-exchange", SECRET)}
zone "{zone}" {{
    type secondary;
    primaries port {eu.port} {{ {HOSTS["eu"]} key gslb-exchange; }};
    file "exchange-eu.db";
    request-ixfr yes;
    min-refresh-time 1;
    max-refresh-time 1;
    check-names ignore;
}};
"""
    before = served(apis["eu"], "ixfr")
    # transfers and SOA checks from us's address, which eu lists as a peer nameserver
    with running_bind(tmp_path, options=f"transfer-source {HOSTS['us']};", extra=secondary) as named:
        wait_for(lambda: named.records(f"app.{apex('eu')}", "A") == {"192.0.2.7"}, 15)
        assert named.records(f"all.{apex('eu')}", "AAAA") == {"2001:db8::1"}
        set_admin(apis["eu"], "app.gslb.test", "192.0.2.7", "down")
        try:
            wait_for(lambda: named.records(f"app.{apex('eu')}", "A") == set(), 15)
        finally:
            set_admin(apis["eu"], "app.gslb.test", "192.0.2.7", "obey")
        wait_for(lambda: named.records(f"app.{apex('eu')}", "A") == {"192.0.2.7"}, 15)
        log = named.log()
    assert "Transfer status: success" in log and "TSIG 'gslb-exchange'" in log, log[-3000:]
    assert served(apis["eu"], "ixfr") >= before + 2, log[-3000:]  # named followed both changes by IXFR
