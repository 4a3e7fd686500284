"""The judgments of `gslbd doctor` on replies built in memory: a failure names what is wrong and the fix."""

from __future__ import annotations

import time

import dns.flags
import dns.message
import dns.rcode
import dns.rrset

from gslbd.cli.doctor_checks import (
    Result,
    delegation_lines,
    judge_delegation,
    judge_ds,
    judge_glue,
    judge_name,
    judge_peer,
    judge_signatures,
    judge_soa,
    local_server,
    nameserver_ports,
)
from gslbd.config import load_config_text
from gslbd.model.zone import Nameserver, Soa, Zone

ZONE = Zone(
    "gslb.example.com.",
    30,
    30,
    Soa("ns1.gslb.example.com.", "hostmaster.example.com.", 1),
    (
        Nameserver("ns1.gslb.example.com.", ("192.0.2.53",)),
        Nameserver("gslb-ns-us-gslb.example.com.", ("198.51.100.53", "2001:db8::53")),
        Nameserver("ns.example.net."),
    ),
)
PARENT = "example.com."
SERVER = ("127.0.0.1", 5300)


def reply(
    rcode: int = dns.rcode.NOERROR,
    *,
    aa: bool = False,
    answer: tuple[str, ...] = (),
    authority: tuple[str, ...] = (),
    additional: tuple[str, ...] = (),
) -> dns.message.Message:
    query = dns.message.make_query(ZONE.origin, "NS")
    msg = dns.message.make_response(query)
    msg.set_rcode(rcode)
    if aa:
        msg.flags |= dns.flags.AA
    for section, texts in ((msg.answer, answer), (msg.authority, authority), (msg.additional, additional)):
        for text in texts:
            name, ttl, rtype, rdata = text.split(" ", 3)
            section.append(dns.rrset.from_text(name, int(ttl), "IN", rtype, rdata))
    return msg


def test_nameserver_ports_come_from_dns_listen_and_the_peers() -> None:
    config = load_config_text(
        'dns: {listen: ["127.0.0.1:5353", "[::1]:5354"]}\n'
        "peers:\n  sites:\n    - {name: us, nameservers: ['127.0.0.3:5400']}\n"
    )
    assert nameserver_ports(config) == {"127.0.0.1": 5353, "::1": 5354, "127.0.0.3": 5400}
    assert local_server(config) == ("127.0.0.1", 5353)
    assert local_server(load_config_text('dns: {listen: ["0.0.0.0:53"]}\n')) == ("127.0.0.1", 53)


def test_delegation_lines_hold_the_ns_set_and_the_addresses_of_names_inside_the_parent() -> None:
    assert delegation_lines(ZONE, PARENT) == [
        "gslb.example.com. NS ns1.gslb.example.com.",
        "gslb.example.com. NS gslb-ns-us-gslb.example.com.",
        "gslb.example.com. NS ns.example.net.",
        "ns1.gslb.example.com. A 192.0.2.53",
        "gslb-ns-us-gslb.example.com. A 198.51.100.53",
        "gslb-ns-us-gslb.example.com. AAAA 2001:db8::53",
    ]


REFERRAL_NS = (
    "gslb.example.com. 60 NS ns1.gslb.example.com.",
    "gslb.example.com. 60 NS gslb-ns-us-gslb.example.com.",
    "gslb.example.com. 60 NS ns.example.net.",
)


def test_a_referral_to_exactly_the_configured_nameservers_passes() -> None:
    result, listed = judge_delegation(ZONE, PARENT, SERVER, reply(authority=REFERRAL_NS))
    assert result == Result(
        True,
        "delegation of gslb.example.com. in example.com. (asked 127.0.0.1:5300): "
        "NS gslb-ns-us-gslb.example.com., ns.example.net., ns1.gslb.example.com.",
    )
    assert listed == ["gslb-ns-us-gslb.example.com.", "ns.example.net.", "ns1.gslb.example.com."]


def test_an_ns_set_with_a_stale_name_and_a_missing_one_fails_saying_both() -> None:
    stale = (*REFERRAL_NS[:2], "gslb.example.com. 60 NS old.example.net.")
    result, _ = judge_delegation(ZONE, PARENT, SERVER, reply(authority=stale))
    assert not result.ok
    assert result.text.endswith(
        "the parent lists NS gslb-ns-us-gslb.example.com., ns1.gslb.example.com., old.example.net.; "
        "missing ns.example.net.; not configured old.example.net."
    )
    assert result.hint == (
        "make the NS set of gslb.example.com. in example.com. exactly the configured nameservers: "
        "gslb-ns-us-gslb.example.com., ns.example.net., ns1.gslb.example.com. (add ns.example.net., "
        "remove old.example.net.)"
    )


def test_a_refusing_parent_server_is_not_a_server_of_the_parent_zone() -> None:
    result, listed = judge_delegation(ZONE, PARENT, SERVER, reply(dns.rcode.REFUSED))
    assert (result.ok, listed) == (False, [])
    assert result.text.endswith(": the server answered REFUSED")
    assert (
        result.hint
        == "that server does not serve example.com.: point --parent-server at a nameserver of example.com."
    )


def test_glue_that_differs_from_the_config_fails_with_the_records_to_set() -> None:
    listed = ["gslb-ns-us-gslb.example.com.", "ns.example.net.", "ns1.gslb.example.com."]
    found = {"ns1.gslb.example.com.": {"192.0.2.53"}, "gslb-ns-us-gslb.example.com.": {"198.51.100.99"}}
    result = judge_glue(ZONE, PARENT, listed, found)
    assert result == Result(
        False,
        "glue of gslb.example.com. in example.com.: gslb-ns-us-gslb.example.com. has 198.51.100.99 in "
        "example.com., the config says 198.51.100.53, 2001:db8::53",
        "resolvers reach gslb.example.com. through these addresses: set them in the zone example.com. to "
        "gslb-ns-us-gslb.example.com. A 198.51.100.53; gslb-ns-us-gslb.example.com. AAAA 2001:db8::53 "
        "(and remove the wrong ones)",
    )
    found["gslb-ns-us-gslb.example.com."] = {"198.51.100.53", "2001:db8::53"}
    assert judge_glue(ZONE, PARENT, listed, found).ok


def test_a_nameserver_answering_without_aa_does_not_serve_the_zone() -> None:
    soa = "gslb.example.com. 30 SOA ns1.gslb.example.com. hostmaster.example.com. 1 3600 600 604800 30"
    assert judge_soa(ZONE, "ns1.gslb.example.com.", SERVER, reply(aa=True, answer=(soa,))).ok
    result = judge_soa(ZONE, "ns1.gslb.example.com.", SERVER, reply(answer=(soa,)))
    assert result.text.endswith("with AA: got NOERROR, AA clear")
    assert (
        result.hint
        == "the server there does not serve gslb.example.com.: is it gslbd with this zone under zones[]?"
    )


def test_a_name_without_addresses_points_at_status_and_explain() -> None:
    name = "app.gslb.example.com."
    replies = {"A": reply(dns.rcode.NXDOMAIN, aa=True), "AAAA": reply(dns.rcode.NXDOMAIN, aa=True)}
    result = judge_name("service", name, SERVER, replies)
    assert result == Result(
        False,
        "service app.gslb.example.com.: A NXDOMAIN, AAAA NXDOMAIN",
        "no healthy endpoint and all_down decides: see `gslbd status` and "
        "`gslbd explain app.gslb.example.com. --client <address>`",
    )
    chain = (
        "app.z.r.gslb.example.com. 5 CNAME app.r.gslb.example.com.",
        "app.r.gslb.example.com. 5 A 192.0.2.1",
    )
    ok = judge_name(
        "locality name", "app.z.r.gslb.example.com.", SERVER, {"A": reply(aa=True, answer=chain)}, "z"
    )
    assert ok == Result(
        True, "locality name app.z.r.gslb.example.com. (z): CNAME app.r.gslb.example.com. -> A 192.0.2.1"
    )


def test_a_peer_with_a_stale_or_missing_heartbeat_fails() -> None:
    soa = reply(aa=True, answer=("gslb.example.com. 30 SOA a. b. 1 2 3 4 5",))
    beat = reply(aa=True, answer=('heartbeat-us.gslb.example.com. 0 TXT "1000"',))
    fresh = judge_peer("us", SERVER, "gslb.example.com.", soa, beat, 1010.0, 300)
    assert fresh == Result(True, "peer us at 127.0.0.1:5300: serves gslb.example.com., heartbeat 10 s old")
    stale = judge_peer("us", SERVER, "gslb.example.com.", soa, beat, 2000.0, 300)
    assert stale.text == "peer us at 127.0.0.1:5300: heartbeat 1000 s old"
    assert stale.hint.startswith("the peer has not evaluated health for 1000 s (stale_after 300 s)")
    missing = judge_peer("us", SERVER, "gslb.example.com.", soa, reply(dns.rcode.NXDOMAIN, aa=True), 1.0, 300)
    assert missing.text == "peer us at 127.0.0.1:5300: no heartbeat (NXDOMAIN)"
    down = judge_peer("us", SERVER, "gslb.example.com.", "timeout after 1 s", "timeout after 1 s", 1.0, 300)
    assert down.text == "peer us at 127.0.0.1:5300: no answer to SOA gslb.example.com. (timeout after 1 s)"


def test_a_ds_record_in_the_parent_of_an_unsigned_zone_fails() -> None:
    assert judge_ds(ZONE, PARENT, reply(aa=True)).ok
    ds = "gslb.example.com. 60 DS 12345 13 2 " + "ab" * 32
    result = judge_ds(ZONE, PARENT, reply(aa=True, answer=(ds,)))
    assert result.text == f"gslb.example.com. has DS 12345 13 2 {'ab' * 32} in example.com."
    assert result.hint.startswith(
        "remove the DS records of gslb.example.com. from example.com. (at the registrar)"
    )


def _signed_zone() -> Zone:
    from dataclasses import replace

    from gslbd.model.dnssec import Dnssec, DnssecKey

    key = DnssecKey("K", 257, 13, "AAAA", b"\0" * 32, 12345)
    return replace(ZONE, dnssec=Dnssec((key,), cds=("12345 13 2 " + "AB" * 32,)))


def test_a_signed_zone_needs_a_ds_of_a_served_key_in_the_parent() -> None:
    zone = _signed_zone()
    ours = "gslb.example.com. 60 DS 12345 13 2 " + "ab" * 32
    stale = "gslb.example.com. 60 DS 999 13 2 " + "cd" * 32
    ok = judge_ds(zone, PARENT, reply(aa=True, answer=(ours,)))
    assert ok.ok and ok.text.startswith("DS of gslb.example.com. in example.com. matches a served key")
    assert judge_ds(zone, PARENT, reply(aa=True, answer=(ours.replace("60 DS", "60 DS"),))).ok
    missing = judge_ds(zone, PARENT, reply(aa=True))
    assert not missing.ok and "insecure" in missing.text and "gslbd delegation" in missing.hint
    wrong = judge_ds(zone, PARENT, reply(aa=True, answer=(stale,)))
    assert not wrong.ok and "matches none of the zone's keys" in wrong.text


def test_signatures_near_expiry_or_by_unknown_keys_fail_the_doctor() -> None:
    zone = _signed_zone()
    now = 1_800_000_000.0

    def signed(tag: int, expires: float) -> dns.message.Message:
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(expires))
        sig = f"gslb.example.com. 30 RRSIG SOA 13 3 30 {stamp} 20200101000000 {tag} gslb.example.com. AAAA"
        return reply(aa=True, answer=(sig,))

    assert judge_signatures(zone, SERVER, signed(12345, now + 6 * 86400), now).ok
    soon = judge_signatures(zone, SERVER, signed(12345, now + 3600), now)
    assert not soon.ok and "expires in 1.0 h" in soon.text
    stranger = judge_signatures(zone, SERVER, signed(4242, now + 6 * 86400), now)
    assert not stranger.ok and "share the key files" in stranger.hint
    assert not judge_signatures(zone, SERVER, reply(aa=True), now).ok
