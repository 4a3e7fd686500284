"""Three real gslbd sites on 127.0.0.2-4 exchanging health over DNS: publication, learning, failover
across sites with NOTIFY (measured), NOTIFY refused from strangers, TCP for big answers, `gslbd status`.

The sites poll every 5 s here, so a change that shows up elsewhere within a fraction of a second came by
NOTIFY, not by a poll."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator

import dns.message
import dns.opcode
import dns.rcode
import dns.rdatatype
import pytest
from exchange_sites import (
    HOSTS,
    TOKEN,
    ZONE,
    addresses,
    api_url,
    get_json,
    running_sites,
    set_admin,
    site_config,
    sites_port,
    wait_for,
)
from gslbd_harness import Running, free_port, gslbd_command

from gslbd.exchange.wireformat import notify_message

SITES = ("eu", "us", "ap")
EU, US, AP = "192.0.2.1", "198.51.100.1", "203.0.113.1"
BIG = [f"198.51.100.{n}" for n in range(100, 160)]  # 60 addresses: no longer fits 512 bytes of UDP
Sites = tuple[dict[str, Running], dict[str, str]]  # the processes, and their admin API URLs


def services() -> str:
    big = ", ".join(f"{{address: {a}, site: us}}" for a in BIG)
    return f"""\
  - name: app
    policy: failover
    failover_order: [eu, us, ap]
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: {US}, site: us}}
      - {{address: {AP}, site: ap}}
  - name: all
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: "2001:db8::1", site: eu}}
      - {{address: {US}, site: us}}
      - {{address: {AP}, site: ap}}
  - name: big
    max_answers: 100
    endpoints: [{big}]
"""


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    port = sites_port()
    apis = {s: api_url(s, free_port((HOSTS[s],))) for s in SITES}
    configs = {
        s: site_config(
            s,
            port,
            services(),
            interval=5.0,
            stale_after=30.0,
            timeout=0.5,
            extra=f'api: {{listen: "{apis[s].removeprefix("http://")}", token: {TOKEN}}}\n',
        )
        for s in SITES
    }
    with running_sites(tmp_path_factory.mktemp("sites"), configs, port) as running:
        for server in running.values():  # startup NOTIFYs make every site learn the others at once
            wait_for(lambda server=server: addresses(server, "all.gslb.test.") == {EU, US, AP}, 10)
        yield running, apis


def test_every_site_publishes_its_own_healthy_endpoints_and_a_heartbeat(
    sites: Sites,
) -> None:
    running, _ = sites
    assert addresses(running["eu"], "localtargets-all.gslb.test.") == {EU}
    assert addresses(running["eu"], "localtargets-all.gslb.test.", "AAAA") == {"2001:db8::1"}
    assert addresses(running["us"], "localtargets-app.gslb.test.") == {US}
    assert addresses(running["ap"], "localtargets-app.gslb.test.") == {AP}
    assert running["ap"].ask("localtargets-big.gslb.test.").rcode() == dns.rcode.NXDOMAIN  # ap has none
    for site, server in running.items():
        reply = server.ask(f"heartbeat-{site}.gslb.test.", "TXT")
        (beat,) = [rd.strings[0].decode() for rrset in reply.answer for rd in rrset]
        assert abs(float(beat) - time.time()) < 10, (site, beat)


def test_every_site_answers_the_union_of_all_sites_endpoints(
    sites: Sites,
) -> None:
    running, _ = sites
    for server in running.values():
        assert addresses(server, "all.gslb.test.") == {EU, US, AP}
        assert addresses(server, "app.gslb.test.") == {EU}  # failover: eu first, everywhere


def test_a_big_localtargets_answer_is_fetched_over_tcp(
    sites: Sites,
) -> None:
    running, _ = sites
    plain = dns.message.make_query("localtargets-big.gslb.test.", dns.rdatatype.A, use_edns=False)
    assert running["us"].udp(plain).flags & dns.flags.TC  # too big for a UDP answer without EDNS
    for site in ("eu", "ap"):
        reply = running[site].ask("big.gslb.test.", tcp=True)
        assert {rd.to_text() for rrset in reply.answer for rd in rrset} == set(BIG)


def test_failover_moves_to_the_next_site_everywhere_within_a_fraction_of_a_second_by_notify(
    sites: Sites,
) -> None:
    running, apis = sites
    began = time.monotonic()
    set_admin(apis["eu"], "app.gslb.test", EU, "down")  # eu's endpoint fails
    local = time.monotonic() - began
    us = wait_for(lambda: addresses(running["us"], "app.gslb.test.") == {US}, 3) + local
    ap = wait_for(lambda: addresses(running["ap"], "app.gslb.test.") == {US}, 3) + local
    ms = f"eu {local * 1000:.0f} ms, us {us * 1000:.0f} ms, ap {ap * 1000:.0f} ms"
    print(f"\nfailover eu -> us with NOTIFY: {ms}")
    assert addresses(running["eu"], "app.gslb.test.") == {US}
    assert max(us, ap) < 1.0  # polls are 5 s apart: this came by NOTIFY
    began = time.monotonic()
    set_admin(apis["eu"], "app.gslb.test", EU, "obey")  # eu is back: failback
    us = wait_for(lambda: addresses(running["us"], "app.gslb.test.") == {EU}, 3)
    ap = wait_for(lambda: addresses(running["ap"], "app.gslb.test.") == {EU}, 3)
    print(f"failback us -> eu with NOTIFY: us {us * 1000:.0f} ms, ap {ap * 1000:.0f} ms")
    assert max(us, ap) < 1.0


def test_three_site_failover_reaches_the_third_site_when_the_first_two_fail(
    sites: Sites,
) -> None:
    running, apis = sites
    set_admin(apis["eu"], "app.gslb.test", EU, "down")
    set_admin(apis["us"], "app.gslb.test", US, "down")
    try:
        for server in running.values():
            wait_for(lambda server=server: addresses(server, "app.gslb.test.") == {AP}, 3)
    finally:
        set_admin(apis["eu"], "app.gslb.test", EU, "obey")
        set_admin(apis["us"], "app.gslb.test", US, "obey")
    for server in running.values():
        wait_for(lambda server=server: addresses(server, "app.gslb.test.") == {EU}, 3)


def test_notify_from_an_unknown_source_is_refused_and_counted(
    sites: Sites,
) -> None:
    running, apis = sites
    reply = running["eu"].send_raw_udp(notify_message(ZONE, 321))  # from 127.0.0.1: no peer lives there
    assert reply is not None
    msg = dns.message.from_wire(reply)
    assert (msg.id, msg.opcode(), msg.rcode()) == (321, dns.opcode.NOTIFY, dns.rcode.REFUSED)
    with urllib.request.urlopen(f"{apis['eu']}/metrics", timeout=5) as response:
        text = response.read().decode()
    assert 'gslbd_exchange_notify_received_total{result="refused"} 1.0' in text
    assert 'gslbd_exchange_notify_received_total{result="accepted"}' in text  # from us and ap


def test_peers_are_shown_by_the_api_and_gslbd_status(
    sites: Sites,
) -> None:
    _, apis = sites
    doc = get_json(f"{apis['eu']}/api/v1/peers")
    assert isinstance(doc, dict)
    peers = {p["name"]: p for p in doc["peers"]}
    assert list(peers) == ["us", "ap"]
    assert peers["us"]["state"] == "fresh"
    assert peers["us"]["endpoints"] == 2 + len(BIG)  # one address in app and in all, 60 in big
    assert peers["us"]["last_answer_age"] < 6
    assert peers["ap"]["nameservers"] == [f"127.0.0.4:{peers['ap']['nameservers'][0].split(':')[1]}"]
    out = subprocess.run(
        gslbd_command("status", "--api", apis["eu"]), capture_output=True, text=True, timeout=30, check=True
    ).stdout
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("PEER"))
    assert lines[header].split() == ["PEER", "STATE", "LAST", "ANSWER", "ENDPOINTS", "ERRORS", "DETAIL"]
    assert lines[header + 1].split()[:2] == ["us", "fresh"]
    assert lines[header + 2].split()[:2] == ["ap", "fresh"]


def test_service_status_shows_endpoints_of_peer_sites_as_they_publish_them(
    sites: Sites,
) -> None:
    _, apis = sites
    doc = get_json(f"{apis['eu']}/api/v1/services/app.gslb.test.")
    assert isinstance(doc, dict)
    rows = [(e["address"], e["site"], e["effective_up"]) for e in doc["endpoints"]]
    assert rows == [(EU, "eu", True), (US, "us", True), (AP, "ap", True)]


def test_logs_say_when_peers_came_up_and_nothing_per_poll(
    sites: Sites,
) -> None:
    running, _ = sites
    log = running["ap"].log()
    assert "peer eu is fresh" in log and "peer us is fresh" in log
    assert log.count("peer eu is fresh") == 1
