"""`peers.tsig`: real gslbd sites sign the exchange. eu and us share the key; ap has another one, so eu and
us learn each other's endpoints (polls and NOTIFY signed and verified) and refuse to learn ap's, and ap
learns nothing from them. Checked with dnspython, `dig -y` and the peers API."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator

import dns.message
import dns.rcode
import dns.tsigkeyring
import pytest
from exchange_sites import HOSTS, ZONE, addresses, running_sites, site_config, sites_port, wait_for
from gslbd_harness import Running, free_port, gslbd_command

pytestmark = pytest.mark.integration

SECRET = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
OTHER = "b3RoZXJvdGhlcm90aGVyb3RoZXJvdGhlcm90aGVyMTI="
EU, US, AP = "192.0.2.1", "198.51.100.1", "203.0.113.1"
SERVICES = f"""\
  - name: all
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: {US}, site: us}}
      - {{address: {AP}, site: ap}}
"""
Sites = tuple[dict[str, Running], dict[str, str]]


def tsig(secret: str) -> str:
    return f"  tsig: {{name: gslb-exchange, secret: {secret}}}\n"


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    port = sites_port()
    apis = {s: f"http://{HOSTS[s]}:{free_port((HOSTS[s],))}" for s in HOSTS}
    configs = {}
    for site, secret in (("eu", SECRET), ("us", SECRET), ("ap", OTHER)):
        text = site_config(site, port, SERVICES, interval=1.0, stale_after=3.0, timeout=0.3)
        api = f'api: {{listen: "{apis[site].removeprefix("http://")}"}}\n'
        configs[site] = text.rstrip("\n") + "\n" + tsig(secret) + api
    with running_sites(tmp_path_factory.mktemp("tsig"), configs, port) as running:
        yield running, apis


def peers_of(api: str) -> dict[str, dict[str, object]]:
    with urllib.request.urlopen(f"{api}/api/v1/peers", timeout=5) as response:
        return {p["name"]: p for p in json.loads(response.read())["peers"]}


def test_sites_sharing_the_key_learn_each_other_and_refuse_a_site_with_another_key(sites: Sites) -> None:
    running, apis = sites
    wait_for(lambda: addresses(running["eu"], f"all.{ZONE}") == {EU, US}, 10)
    wait_for(lambda: addresses(running["us"], f"all.{ZONE}") == {EU, US}, 10)
    # ap's answers are signed with another key: not trusted, so its endpoint never joins the union...
    wait_for(lambda: "(BADSIG)" in str(peers_of(apis["eu"])["ap"]["detail"]), 10)  # ap's TSIG error
    ap = peers_of(apis["eu"])["ap"]
    assert ap["failing"] is True and ap["last_answer"] is None, ap
    assert addresses(running["eu"], f"all.{ZONE}") == {EU, US}
    assert peers_of(apis["eu"])["us"]["state"] == "fresh"
    # us told eu at start-up with a signed NOTIFY, which eu verified and accepted.
    with urllib.request.urlopen(f"{apis['eu']}/metrics", timeout=5) as response:
        metrics = response.read().decode()
    accepted = [
        ln
        for ln in metrics.splitlines()
        if ln.startswith('gslbd_exchange_notify_received_total{result="accepted"}')
    ]
    assert accepted and float(accepted[0].split()[-1]) >= 1
    # ...and ap, whose polls eu and us cannot verify (NOTAUTH with TSIG error BADSIG), learns nothing.
    wait_for(lambda: "TSIG" in str(peers_of(apis["ap"])["eu"]["detail"]), 10)
    assert peers_of(apis["ap"])["eu"]["last_answer"] is None
    assert addresses(running["ap"], f"all.{ZONE}") == {AP}


def test_a_signed_query_gets_a_signed_answer_and_a_badly_signed_one_notauth(sites: Sites) -> None:
    running, _ = sites
    eu = running["eu"]
    ring = dns.tsigkeyring.from_text({"gslb-exchange.": SECRET})
    query = dns.message.make_query(f"localtargets-all.{ZONE}", "A")
    query.use_tsig(ring, keyname="gslb-exchange.")
    raw = eu.send_raw_udp(query.to_wire())
    assert raw is not None
    reply = dns.message.from_wire(raw, keyring=ring, request_mac=query.mac)
    assert reply.had_tsig and [rd.to_text() for rrset in reply.answer for rd in rrset] == [EU]
    wrong = dns.message.make_query(f"localtargets-all.{ZONE}", "A")
    wrong.use_tsig(dns.tsigkeyring.from_text({"gslb-exchange.": OTHER}), keyname="gslb-exchange.")
    raw = eu.send_raw_udp(wrong.to_wire())
    assert raw is not None
    refused = dns.message.from_wire(raw, keyring=False)
    assert refused.rcode() == dns.rcode.NOTAUTH
    assert refused.tsig is not None and refused.tsig[0].error == dns.rcode.BADSIG  # RFC 8945 5.2
    # Ordinary resolvers keep getting ordinary answers.
    assert eu.ask(f"all.{ZONE}").rcode() == dns.rcode.NOERROR


@pytest.mark.skipif(shutil.which("dig") is None, reason="dig (dnsutils) is not installed")
def test_dig_verifies_the_signed_answer(sites: Sites) -> None:
    running, _ = sites
    eu = running["eu"]
    base = ["dig", f"@{eu.host}", "-p", str(eu.port), "+norec", "+tries=1", "+time=2"]
    good = subprocess.run(
        [*base, "-y", f"hmac-sha256:gslb-exchange:{SECRET}", f"localtargets-all.{ZONE}", "A"],
        check=False,
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout
    assert "status: NOERROR" in good and f"{EU}" in good
    assert "TSIG PSEUDOSECTION" in good and "NOERROR" in good.split("TSIG PSEUDOSECTION")[1]
    bad = subprocess.run(
        [*base, "-y", f"hmac-sha256:gslb-exchange:{OTHER}", f"localtargets-all.{ZONE}", "A"],
        check=False,
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout
    assert "status: NOTAUTH" in bad
    unknown = subprocess.run(
        [*base, "-y", f"hmac-sha256:someone-else:{SECRET}", f"localtargets-all.{ZONE}", "A"],
        check=False,
        capture_output=True,
        text=True,
        timeout=10,
    )
    # dig reads the TSIG error record of RFC 8945 5.2 (BADKEY for a key the server does not know).
    assert "status: NOTAUTH" in unknown.stdout or "BADKEY" in unknown.stdout + unknown.stderr
    assert (
        "BADKEY" in unknown.stdout + unknown.stderr
        or "tsig indicates error" in unknown.stdout + unknown.stderr
    )


def test_doctor_says_which_peers_share_the_key(sites: Sites) -> None:
    running, _ = sites
    closed = free_port()  # nothing answers there: the delegation checks fail fast, the peer checks run
    out = subprocess.run(
        gslbd_command(
            "doctor", "--config", str(running["eu"].config_path), "--parent-server", f"127.0.0.1:{closed}"
        ),
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    lines = out.splitlines()
    assert any(
        line.startswith("PASS  peer us at 127.0.0.3:")
        and "verifies and signs with TSIG key gslb-exchange." in line
        for line in lines
    ), out
    failed = [line for line in lines if line.startswith("FAIL  peer ap at 127.0.0.4:")]
    assert len(failed) == 1 and "a question signed with TSIG key gslb-exchange. got" in failed[0], out
    hint = lines[lines.index(failed[0]) + 1]
    assert "every site needs the same peers.tsig key" in hint
