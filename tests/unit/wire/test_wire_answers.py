"""behaviour.md "DNS answers": what each kind of question gets, on the wire, through Responder.handle."""

from __future__ import annotations

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
from wire_support import SOA_TEXT, ask, make_responder, make_view, query, texts

from gslbd.model.service import EndpointKey
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder, compile_table

SOA_NEG = f"gslb.example.com. 60 IN SOA {SOA_TEXT}"


def flags_of(msg: dns.message.Message) -> str:
    return dns.flags.to_text(msg.flags)


def test_answers_from_a_served_zone_are_authoritative_without_recursion(responder: Responder) -> None:
    for name, rtype in [
        ("app.gslb.example.com.", "A"),
        ("gslb.example.com.", "SOA"),
        ("nowhere.gslb.example.com.", "A"),
        ("app.gslb.example.com.", "MX"),
    ]:
        msg = ask(responder, query(name, rtype))
        assert flags_of(msg) == "QR AA RD", (name, rtype)


def test_rd_is_copied_from_the_query(responder: Responder) -> None:
    assert flags_of(ask(responder, query("app.gslb.example.com.", rd=False))) == "QR AA"
    assert flags_of(ask(responder, query("app.gslb.example.com.", rd=True))) == "QR AA RD"
    assert flags_of(ask(responder, query("www.example.net.", rd=False))) == "QR"


def test_names_outside_every_zone_are_refused_without_aa(responder: Responder) -> None:
    for name in ["www.example.net.", "example.com.", ".", "org."]:
        msg = ask(responder, query(name))
        assert msg.rcode() == dns.rcode.REFUSED, name
        assert flags_of(msg) == "QR RD"
        assert texts(msg) == [] and texts(msg, "authority") == []


def test_apex_answers_soa_and_ns_with_glue_for_in_zone_nameservers(responder: Responder) -> None:
    soa = ask(responder, query("gslb.example.com.", "SOA"))
    assert texts(soa) == [f"gslb.example.com. 300 IN SOA {SOA_TEXT}"]
    ns = ask(responder, query("gslb.example.com.", "NS"))
    assert texts(ns) == [
        "gslb.example.com. 300 IN NS ns1.gslb.example.com.",
        "gslb.example.com. 300 IN NS ns.example.net.",
    ]
    assert texts(ns, "additional") == [
        "ns1.gslb.example.com. 300 IN A 192.0.2.53",
        "ns1.gslb.example.com. 300 IN AAAA 2001:db8::53",
    ]


def test_service_answers_its_family_with_the_service_ttl(responder: Responder) -> None:
    a = ask(responder, query("app.gslb.example.com.", "A"))
    assert texts(a) == [
        "app.gslb.example.com. 20 IN A 192.0.2.1",
        "app.gslb.example.com. 20 IN A 192.0.2.2",
        "app.gslb.example.com. 20 IN A 192.0.2.3",
    ]
    aaaa = ask(responder, query("app.gslb.example.com.", "AAAA"))
    assert texts(aaaa) == [
        "app.gslb.example.com. 20 IN AAAA 2001:db8::1",
        "app.gslb.example.com. 20 IN AAAA 2001:db8::2",
    ]


def test_round_robin_rotates_the_first_address_per_query(responder: Responder) -> None:
    firsts = [texts(ask(responder, query("app.gslb.example.com.")))[0].split()[-1] for _ in range(6)]
    assert firsts == ["192.0.2.1", "192.0.2.2", "192.0.2.3"] * 2


def test_hostname_endpoints_are_answered_as_cname_for_a_aaaa_and_cname(responder: Responder) -> None:
    for rtype in ["A", "AAAA", "CNAME"]:
        msg = ask(responder, query("alias.gslb.example.com.", rtype))
        assert msg.rcode() == dns.rcode.NOERROR
        assert texts(msg) == ["alias.gslb.example.com. 20 IN CNAME lb.example.net."], rtype


def test_existing_name_without_the_type_is_nodata_with_negative_ttl_soa(responder: Responder) -> None:
    for name, rtype in [
        ("solo.gslb.example.com.", "AAAA"),
        ("app.gslb.example.com.", "MX"),
        ("app.gslb.example.com.", "TXT"),
        ("app.gslb.example.com.", "HTTPS"),
        ("info.gslb.example.com.", "A"),
        ("app.gslb.example.com.", 65280),
    ]:
        msg = ask(responder, query(name, rtype))
        assert msg.rcode() == dns.rcode.NOERROR, (name, rtype)
        assert texts(msg) == []
        assert texts(msg, "authority") == [SOA_NEG]


def test_nonexistent_names_in_a_zone_are_nxdomain_with_the_zone_soa(responder: Responder) -> None:
    for name in ["nope.gslb.example.com.", "a.b.c.gslb.example.com.", "under.app.gslb.example.com."]:
        msg = ask(responder, query(name))
        assert msg.rcode() == dns.rcode.NXDOMAIN, name
        assert flags_of(msg) == "QR AA RD"
        assert texts(msg, "authority") == [SOA_NEG]


def test_nxdomain_uses_the_most_specific_zone(responder: Responder) -> None:
    msg = ask(responder, query("nope.inner.gslb.example.com."))
    assert msg.rcode() == dns.rcode.NXDOMAIN
    assert texts(msg, "authority") == [
        "inner.gslb.example.com. 30 IN SOA ns1.gslb.example.com. hostmaster.example.com. 7 3600 600 604800 45"
    ]


def test_empty_non_terminals_are_nodata_not_nxdomain(responder: Responder) -> None:
    msg = ask(responder, query("deep.gslb.example.com.", "A"))
    assert msg.rcode() == dns.rcode.NOERROR
    assert texts(msg) == [] and texts(msg, "authority") == [SOA_NEG]


def test_the_question_is_echoed_with_its_original_letter_case(responder: Responder) -> None:
    for name in ["ApP.GsLb.ExAmPlE.CoM.", "NoPe.GSLB.example.COM.", "WWW.Example.NET."]:
        msg = ask(responder, query(name))
        assert msg.question[0].name.to_text() == name
        for rrset in msg.answer:
            assert rrset.name.to_text() == name  # owners point at the question: its case is echoed


def test_any_gets_a_minimal_answer_of_one_rrset(responder: Responder) -> None:
    service = ask(responder, query("app.gslb.example.com.", "ANY"))
    assert [(r.name.to_text(), dns.rdatatype.to_text(r.rdtype)) for r in service.answer] == [
        ("app.gslb.example.com.", "A")
    ]
    apex = ask(responder, query("gslb.example.com.", "ANY"))
    assert texts(apex) == [f"gslb.example.com. 300 IN SOA {SOA_TEXT}"]
    static = ask(responder, query("info.gslb.example.com.", "ANY"))
    assert texts(static) == [
        'info.gslb.example.com. 120 IN TXT "hello"',
        'info.gslb.example.com. 120 IN TXT "world"',
    ]


def test_zone_transfers_are_refused(responder: Responder) -> None:
    for rtype in ["AXFR", "IXFR"]:
        for name in ["gslb.example.com.", "nope.gslb.example.com."]:
            msg = ask(responder, query(name, rtype), tcp=True)
            assert msg.rcode() == dns.rcode.REFUSED
            assert flags_of(msg) == "QR RD"


def test_static_records_are_served_as_configured(responder: Responder) -> None:
    assert texts(ask(responder, query("mail.gslb.example.com.", "MX"))) == [
        "mail.gslb.example.com. 120 IN MX 10 mx.example.net."
    ]
    assert texts(ask(responder, query("x.deep.gslb.example.com."))) == [
        "x.deep.gslb.example.com. 120 IN A 192.0.2.99"
    ]
    assert texts(ask(responder, query("www.gslb.example.com.", "CNAME"))) == [
        "www.gslb.example.com. 120 IN CNAME app.gslb.example.com."
    ]


def test_all_down_modes_answer_as_configured(responder: Responder) -> None:
    sf = ask(responder, query("sf.gslb.example.com."))
    assert (sf.rcode(), flags_of(sf), texts(sf, "authority")) == (dns.rcode.SERVFAIL, "QR RD", [])  # no AA
    nx = ask(responder, query("nx.gslb.example.com."))
    assert (nx.rcode(), texts(nx, "authority")) == (dns.rcode.NXDOMAIN, [SOA_NEG])
    nd = ask(responder, query("nd.gslb.example.com."))
    assert (nd.rcode(), texts(nd), texts(nd, "authority")) == (dns.rcode.NOERROR, [], [SOA_NEG])
    fb = ask(responder, query("fb.gslb.example.com."))
    assert texts(fb) == ["fb.gslb.example.com. 20 IN A 198.51.100.200"]
    fb6 = ask(responder, query("fb.gslb.example.com.", "AAAA"))
    assert texts(fb6) == ["fb.gslb.example.com. 20 IN AAAA 2001:db8::200"]
    serve_all = ask(responder, query("serveall.gslb.example.com."))
    assert texts(serve_all) == [
        "serveall.gslb.example.com. 20 IN A 192.0.2.64",
        "serveall.gslb.example.com. 20 IN A 192.0.2.65",
    ]


def test_swap_serves_the_new_table_at_once(responder: Responder) -> None:
    down: dict[EndpointKey, bool] = {("solo.gslb.example.com.", "192.0.2.9"): False}
    before = ask(responder, query("solo.gslb.example.com."))
    assert texts(before) == ["solo.gslb.example.com. 20 IN A 192.0.2.9"]
    view = make_view(snapshot=Snapshot(version=2, health=down))
    responder.swap(compile_table(view, max_udp_payload=1232, use_client_subnet=True), view)
    after = ask(responder, query("solo.gslb.example.com."))
    # serve_all: the only endpoint, although down, is still answered; health of another service:
    assert texts(after) == ["solo.gslb.example.com. 20 IN A 192.0.2.9"]
    assert ask(responder, query("sf.gslb.example.com.")).rcode() == dns.rcode.NOERROR
    assert responder.view is view


def test_the_response_id_is_the_query_id() -> None:
    responder = make_responder()
    for qid in [0, 1, 0x1234, 0xFFFF]:
        assert ask(responder, query("app.gslb.example.com.", qid=qid)).id == qid
        assert ask(responder, query("zz.example.net.", qid=qid)).id == qid
