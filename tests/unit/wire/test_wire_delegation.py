"""Zone cuts (static NS below the apex) and DNAME (RFC 6672): the answers, signed and unsigned, and the
same bytes from the C table, the Python fast path and the dnspython slow path."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import dns.dnssec
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_support import CLIENT, client, query, texts

from gslbd.answer import Answer, Referral, build_view
from gslbd.clock import FakeClock
from gslbd.config import check_config_text, load_config_text
from gslbd.config.dnssec import generate_key_pair, read_key_pair
from gslbd.model.config import Config
from gslbd.model.dnssec import Dnssec
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.server.build import AnswerBuilder
from gslbd.state.snapshot import Snapshot
from gslbd.types import Rcode
from gslbd.wire import Responder, ctable, slow_response

ORIGIN = "cuts.example."
ZONE_NAME = dns.name.from_text(ORIGIN)
DS_TEXT = "12345 13 2 " + "ab" * 32
CONFIG_TEXT = f"""
version: 1
zones:
  - origin: {ORIGIN}
    ttl: 300
    negative_ttl: 60
    nameservers: [{{name: ns1.{ORIGIN}, address: 192.0.2.53}}]
    records:
      - {{name: sub, type: NS, value: [ns1.sub, ns2.x.sub, ns.example.net.]}}
      - {{name: ns1.sub, type: A, value: 192.0.2.10}}
      - {{name: ns1.sub, type: AAAA, value: "2001:db8::10"}}
      - {{name: ns2.x.sub, type: A, value: 192.0.2.11}}
      - {{name: secure, type: NS, value: ns.example.net.}}
      - {{name: secure, type: DS, value: "{DS_TEXT}"}}
      - {{name: old, type: DNAME, value: new.{ORIGIN}, ttl: 120}}
      - {{name: www.new, type: A, value: 192.0.2.80}}
      - {{name: to-old, type: CNAME, value: www.old}}
      - {{name: to-sub, type: CNAME, value: www.sub}}
      - {{name: out, type: DNAME, value: example.net.}}
      - {{name: far, type: DNAME, value: {"l" * 60}.{"m" * 60}.{"n" * 60}.example.net.}}
services:
  - name: app.{ORIGIN}
    endpoints: [{{address: 192.0.2.1}}, {{address: 192.0.2.2}}]
    policy: round_robin
  - name: lb.new.{ORIGIN}
    endpoints: [{{address: 192.0.2.5}}]
"""
FAR_NAME = ("q" * 40 + ".") * 2 + "far." + ORIGIN  # its DNAME target makes a name longer than 255


def env() -> PolicyEnv:
    return PolicyEnv(NoLocator(), {}, random.Random(1))


class World:
    """One config's view and table, answered by the C table, the responder without it and the slow path."""

    def __init__(self, config: Config) -> None:
        self.clock = FakeClock()
        self.view, self.table = AnswerBuilder(self.clock).build(config, Snapshot(version=1), env())
        self.python = Responder(self.table, self.view, random.Random(3), native=False)
        self.native = (
            Responder(self.table, self.view, random.Random(3), native=True) if ctable.AVAILABLE else None
        )
        self.keyset: dns.rrset.RRset | None = None

    def ask(self, name: str, rtype: str = "A", *, dnssec_ok: bool = False) -> dns.message.Message:
        """The response, after checking that every path writes the same bytes for it."""
        wire = query(name, rtype, dnssec_ok=dnssec_ok)
        ip, v6 = client(CLIENT)
        slow = slow_response(
            wire,
            self.view,
            ip,
            v6,
            tcp=False,
            max_udp_payload=1232,
            use_client_subnet=True,
            rng=random.Random(1),
            seq=0,
            signer=self.table.signer,
            signed_zones=self.table.signed_zones,
        )
        assert slow is not None
        for responder in (self.python, self.native):
            if responder is not None:
                fast = responder.handle(wire, ip, v6, False)
                assert fast is not None
                assert fast == slow, f"{name} {rtype} differs"
        return dns.message.from_wire(slow)

    def validate(self, rrset: dns.rrset.RRset, msg: dns.message.Message) -> None:
        assert self.keyset is not None
        section = [*msg.answer, *msg.authority, *msg.additional]
        sig = next(
            r
            for r in section
            if r.rdtype == dns.rdatatype.RRSIG and r.name == rrset.name and r.covers == rrset.rdtype
        )
        dns.dnssec.validate(rrset, sig, {ZONE_NAME: self.keyset}, now=self.clock.wall())


@pytest.fixture(scope="module")
def world() -> World:
    return World(load_config_text(CONFIG_TEXT))


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> World:
    config = load_config_text(CONFIG_TEXT)
    tmp = tmp_path_factory.mktemp("keys")
    keys = tuple(
        read_key_pair(generate_key_pair(ORIGIN, 13, sep, Path(tmp)), ORIGIN) for sep in (True, False)
    )
    zone = replace(config.zones[0], dnssec=Dnssec(keys))
    out = World(replace(config, zones=(zone,)))
    out.keyset = out.ask(ORIGIN, "DNSKEY", dnssec_ok=True).answer[0]
    return out


SUB_NS = [
    f"sub.{ORIGIN} 300 IN NS ns1.sub.{ORIGIN}",
    f"sub.{ORIGIN} 300 IN NS ns2.x.sub.{ORIGIN}",
    f"sub.{ORIGIN} 300 IN NS ns.example.net.",
]
SUB_GLUE = [
    f"ns1.sub.{ORIGIN} 300 IN A 192.0.2.10",
    f"ns1.sub.{ORIGIN} 300 IN AAAA 2001:db8::10",
    f"ns2.x.sub.{ORIGIN} 300 IN A 192.0.2.11",
]


@pytest.mark.parametrize(
    ("label", "rtype"),
    [
        ("sub", "A"),
        ("sub", "NS"),
        ("sub", "SOA"),
        ("sub", "ANY"),
        ("www.sub", "A"),
        ("a.b.www.sub", "TXT"),
        ("ns1.sub", "A"),
        ("ns1.sub", "DS"),
        ("x.sub", "AAAA"),
        ("ns2.x.sub", "A"),
    ],
)
def test_names_at_and_below_a_cut_get_the_referral_with_its_glue(
    world: World, label: str, rtype: str
) -> None:
    msg = world.ask(f"{label}.{ORIGIN}", rtype)
    assert msg.rcode() == dns.rcode.NOERROR
    assert not msg.flags & dns.flags.AA
    assert msg.answer == []
    assert texts(msg, "authority") == SUB_NS
    assert texts(msg, "additional") == SUB_GLUE


def test_ds_at_a_cut_is_the_parents_authoritative_answer(world: World) -> None:
    msg = world.ask(f"secure.{ORIGIN}", "DS")
    assert msg.flags & dns.flags.AA
    assert texts(msg) == [f"secure.{ORIGIN} 300 IN DS {DS_TEXT}"]
    nodata = world.ask(f"sub.{ORIGIN}", "DS")
    assert nodata.flags & dns.flags.AA and nodata.rcode() == dns.rcode.NOERROR and not nodata.answer
    assert [r.rdtype for r in nodata.authority] == [dns.rdatatype.SOA]


def test_a_referral_without_do_carries_no_ds(world: World) -> None:
    msg = world.ask(f"www.secure.{ORIGIN}", "A")
    assert texts(msg, "authority") == [f"secure.{ORIGIN} 300 IN NS ns.example.net."]
    assert msg.additional == []


def test_the_view_marks_the_cut_its_glue_and_the_empty_non_terminal_between() -> None:
    view = build_view(load_config_text(CONFIG_TEXT), Snapshot(version=1), env())
    referrals = {n: d.referral for n, d in view.names.items() if d.referral is not None}
    assert set(referrals) == {
        f"sub.{ORIGIN}",
        f"ns1.sub.{ORIGIN}",
        f"x.sub.{ORIGIN}",
        f"ns2.x.sub.{ORIGIN}",
        f"secure.{ORIGIN}",
    }
    sub = referrals[f"sub.{ORIGIN}"]
    assert isinstance(sub, Referral) and sub.cut == f"sub.{ORIGIN}" and sub.ds == () and sub.nsec_ttl == 60
    assert referrals[f"secure.{ORIGIN}"].ds[0].rdata == DS_TEXT  # type: ignore[union-attr]


def test_names_below_a_dname_get_the_dname_its_synthesized_cname_and_the_target(world: World) -> None:
    msg = world.ask(f"www.old.{ORIGIN}", "A")
    assert msg.flags & dns.flags.AA and msg.rcode() == dns.rcode.NOERROR
    assert texts(msg) == [
        f"old.{ORIGIN} 120 IN DNAME new.{ORIGIN}",
        f"www.old.{ORIGIN} 120 IN CNAME www.new.{ORIGIN}",
        f"www.new.{ORIGIN} 300 IN A 192.0.2.80",
    ]


def test_a_dname_chain_reaches_a_service_and_its_policy_answers(world: World) -> None:
    msg = world.ask(f"lb.old.{ORIGIN}", "A")
    assert texts(msg)[1:] == [
        f"lb.old.{ORIGIN} 120 IN CNAME lb.new.{ORIGIN}",
        f"lb.new.{ORIGIN} 300 IN A 192.0.2.5",
    ]


def test_a_dname_target_that_does_not_exist_ends_in_nxdomain(world: World) -> None:
    msg = world.ask(f"nope.old.{ORIGIN}", "A")
    assert msg.rcode() == dns.rcode.NXDOMAIN
    assert [r.rdtype for r in msg.answer] == [dns.rdatatype.DNAME, dns.rdatatype.CNAME]
    assert [r.rdtype for r in msg.authority] == [dns.rdatatype.SOA]


def test_a_dname_out_of_our_zones_gives_the_cname_for_the_resolver_to_follow(world: World) -> None:
    msg = world.ask(f"a.b.out.{ORIGIN}", "AAAA")
    assert msg.rcode() == dns.rcode.NOERROR
    assert texts(msg)[1] == f"a.b.out.{ORIGIN} 300 IN CNAME a.b.example.net."


def test_a_cname_into_a_dname_is_followed_through_it(world: World) -> None:
    msg = world.ask(f"to-old.{ORIGIN}", "A")
    assert [r.rdtype for r in msg.answer] == [
        dns.rdatatype.CNAME,
        dns.rdatatype.DNAME,
        dns.rdatatype.CNAME,
        dns.rdatatype.A,
    ]


def test_a_cname_into_a_cut_gives_the_cname_then_the_referral(world: World) -> None:
    msg = world.ask(f"to-sub.{ORIGIN}", "A")
    assert msg.flags & dns.flags.AA and msg.rcode() == dns.rcode.NOERROR
    assert texts(msg) == [f"to-sub.{ORIGIN} 300 IN CNAME www.sub.{ORIGIN}"]
    assert texts(msg, "authority") == SUB_NS
    assert texts(msg, "additional") == SUB_GLUE


def test_a_signed_cname_into_a_cut_signs_the_cname_and_proves_no_ds(signed: World) -> None:
    msg = signed.ask(f"to-sub.{ORIGIN}", "A", dnssec_ok=True)
    signed.validate(msg.answer[0], msg)
    assert [r.rdtype for r in msg.authority] == [dns.rdatatype.NS, dns.rdatatype.NSEC, dns.rdatatype.RRSIG]
    signed.validate(msg.authority[1], msg)


def test_the_dname_owner_answers_its_own_dname_and_nodata(world: World) -> None:
    assert texts(world.ask(f"old.{ORIGIN}", "DNAME")) == [f"old.{ORIGIN} 120 IN DNAME new.{ORIGIN}"]
    assert world.ask(f"old.{ORIGIN}", "A").answer == []


def test_a_synthesized_name_longer_than_255_octets_is_yxdomain(world: World) -> None:
    msg = world.ask(FAR_NAME, "A")
    assert msg.rcode() == dns.rcode.YXDOMAIN
    assert [r.rdtype for r in msg.answer] == [dns.rdatatype.DNAME]


@pytest.mark.skipif(not ctable.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")
def test_ordinary_nonexistent_names_stay_in_c_and_names_below_cuts_or_dnames_go_to_the_slow_path(
    world: World,
) -> None:
    assert world.native is not None
    before = world.native.slow_count
    assert world.native.handle(query(f"nope.{ORIGIN}"), 1, False, False) is not None
    assert world.native.slow_count == before
    world.native.handle(query(f"q.www.sub.{ORIGIN}"), 1, False, False)  # the cut's referral
    assert world.native.slow_count == before + 1
    world.native.handle(query(f"x.www.old.{ORIGIN}"), 1, False, False)  # a DNAME's synthesis
    assert world.native.slow_count == before + 2


def test_a_signed_referral_carries_the_signed_ds_and_unsigned_ns_and_glue(signed: World) -> None:
    msg = signed.ask(f"www.secure.{ORIGIN}", "A", dnssec_ok=True)
    assert not msg.flags & dns.flags.AA and msg.rcode() == dns.rcode.NOERROR
    types = [(r.rdtype, r.covers) for r in msg.authority]
    assert types == [(dns.rdatatype.NS, 0), (dns.rdatatype.DS, 0), (dns.rdatatype.RRSIG, dns.rdatatype.DS)]
    signed.validate(msg.authority[1], msg)


def test_a_signed_insecure_referral_carries_the_nsec_proving_no_ds(signed: World) -> None:
    for name in (f"sub.{ORIGIN}", f"deep.www.sub.{ORIGIN}", f"ns1.sub.{ORIGIN}"):
        msg = signed.ask(name, "A", dnssec_ok=True)
        assert not msg.flags & dns.flags.AA
        assert texts(msg, "authority")[:3] == SUB_NS
        nsec = msg.authority[1]
        assert nsec.rdtype == dns.rdatatype.NSEC and nsec.name == dns.name.from_text(f"sub.{ORIGIN}")
        bitmap = set(nsec[0].to_text().split()[1:])
        assert "NS" in bitmap and "DS" not in bitmap and "SOA" not in bitmap
        signed.validate(nsec, msg)
        assert texts(msg, "additional") == SUB_GLUE  # glue unsigned
        assert all(r.rdtype != dns.rdatatype.RRSIG for r in msg.additional)


def test_a_signed_ds_answer_at_a_cut_is_authoritative_and_signed(signed: World) -> None:
    msg = signed.ask(f"secure.{ORIGIN}", "DS", dnssec_ok=True)
    assert msg.flags & dns.flags.AA
    signed.validate(msg.answer[0], msg)


def test_a_signed_dname_answer_signs_the_dname_but_not_the_synthesized_cname(signed: World) -> None:
    msg = signed.ask(f"www.old.{ORIGIN}", "A", dnssec_ok=True)
    covered = [r.covers for r in msg.answer if r.rdtype == dns.rdatatype.RRSIG]
    assert covered == [dns.rdatatype.DNAME, dns.rdatatype.A]
    signed.validate(msg.answer[0], msg)


CONFIG_ERRORS = [
    (
        "{name: www.sub, type: A, value: 192.0.2.9}",
        "records[12].value",
        f"'www.sub.{ORIGIN}' is below the zone cut 'sub.{ORIGIN}': only glue (A/AAAA of the cut's "
        "nameservers) can be there; the A record belongs in the child zone",
    ),
    (
        "{name: sub, type: TXT, value: hi}",
        "records[12].value",
        f"'sub.{ORIGIN}' is a zone cut (its NS records delegate it): only NS, DS and the glue of its "
        "nameservers can be there; the TXT record belongs in the child zone",
    ),
    (
        "{name: a.old, type: TXT, value: hi}",
        "records[12].value",
        f"'a.old.{ORIGIN}' is below the DNAME at 'old.{ORIGIN}', which redirects every name below it "
        "(RFC 6672): this record would never be answered",
    ),
    (
        "{name: old, type: DNAME, value: other.example., ttl: 120}",
        "records[12].value",
        f"'old.{ORIGIN}' has more than one DNAME (RFC 6672: a DNAME RRset holds one record)",
    ),
    (
        "{name: '@', type: DNAME, value: other.example.}",
        "records[12].value",
        "a DNAME at the apex would redirect the names gslbd keeps in every zone (heartbeats, the "
        "exchange's); put it below the apex",
    ),
    (
        "{name: lame, type: NS, value: ns.lame}",
        "records[12]",
        f"the nameserver 'ns.lame.{ORIGIN}' is below the zone cut 'lame.{ORIGIN}', so it needs an A or AAAA "
        "record (glue)",
    ),
]


@pytest.mark.parametrize(("record", "path", "message"), CONFIG_ERRORS)
def test_records_that_a_cut_or_dname_hides_are_located_config_errors(
    record: str, path: str, message: str
) -> None:
    text = CONFIG_TEXT.replace("services:", f"      - {record}\nservices:")
    _, problems = check_config_text(text)
    errors = [(p.path, p.message) for p in problems if p.severity == "error"]
    assert errors == [(f"zones[0].{path}", message)]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            f"api.sub.{ORIGIN}",
            f"'api.sub.{ORIGIN}' is at or below the zone cut 'sub.{ORIGIN}': the child zone's "
            "servers answer it",
        ),
        (
            f"api.old.{ORIGIN}",
            f"'api.old.{ORIGIN}' is below the DNAME at 'old.{ORIGIN}', which redirects every name below it",
        ),
    ],
)
def test_a_service_below_a_cut_or_dname_is_a_located_config_error(name: str, message: str) -> None:
    text = CONFIG_TEXT + f"  - name: {name}\n    endpoints: [{{address: 192.0.2.7}}]\n"
    _, problems = check_config_text(text)
    found = [(p.line, p.path, p.message) for p in problems if p.severity == "error"]
    assert found == [(text.splitlines().index(f"  - name: {name}") + 1, "services[2].name", message)]


LABEL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
BASES = [
    "sub",
    "x.sub",
    "ns1.sub",
    "ns2.x.sub",
    "secure",
    "old",
    "out",
    "far",
    "to-old",
    "to-sub",
    "new",
    "lb.new",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_path_gives_the_same_bytes_at_and_below_cuts_and_dnames(
    data: st.DataObject, world: World, signed: World
) -> None:
    labels = data.draw(st.lists(LABEL, max_size=3), "labels")
    base = data.draw(st.sampled_from(BASES), "base")
    name = ".".join([*labels, base, ORIGIN.rstrip(".")]) + "."
    rng = random.Random(data.draw(st.integers(0, 1000), "case"))
    name = "".join(c.upper() if rng.random() < 0.5 else c for c in name)
    rtype = data.draw(
        st.sampled_from(["A", "AAAA", "NS", "DS", "DNAME", "CNAME", "TXT", "ANY", "SOA"]), "type"
    )
    dnssec_ok = data.draw(st.booleans(), "do")
    target = data.draw(st.sampled_from([world, signed]), "world")
    target.ask(name, rtype, dnssec_ok=dnssec_ok)  # asserts C, Python and the slow path agree


def test_the_nsec_chain_links_the_cuts_but_no_name_below_them() -> None:
    from gslbd.wire.denial import chain_names, name_key

    view = build_view(load_config_text(CONFIG_TEXT), Snapshot(version=1), env())
    links = chain_names(view, [ORIGIN])[ORIGIN]
    for below in ("ns1.sub", "ns2.x.sub", "x.sub"):
        assert name_key(f"{below}.{ORIGIN}", ORIGIN) not in links
    assert links[name_key(f"sub.{ORIGIN}", ORIGIN)] == (int(dns.rdatatype.NS),)
    assert links[name_key(f"secure.{ORIGIN}", ORIGIN)] == (int(dns.rdatatype.NS), int(dns.rdatatype.DS))


def test_the_answer_model_resolves_below_cuts_and_dnames_without_the_wire() -> None:
    view = build_view(load_config_text(CONFIG_TEXT), Snapshot(version=1), env())

    def resolve(name: str, rtype: str = "A") -> Answer:
        return view.resolve(name, rtype, 0, False, random.Random(0), 0)

    below = resolve(f"a.b.sub.{ORIGIN}", "MX")
    assert below.referral is not None and below.referral.cut == f"sub.{ORIGIN}"
    assert (below.rcode, below.authoritative, below.answer) == (Rcode.NOERROR, False, ())
    assert [rr.rdata for rr in below.authority] == [
        f"ns1.sub.{ORIGIN}",
        f"ns2.x.sub.{ORIGIN}",
        "ns.example.net.",
    ]
    dname = resolve(f"www.old.{ORIGIN}")
    assert [(rr.name, rr.rtype, rr.ttl) for rr in dname.answer] == [
        (f"old.{ORIGIN}", "DNAME", 120),
        (f"www.old.{ORIGIN}", "CNAME", 120),
        (f"www.new.{ORIGIN}", "A", 300),
    ]
    assert resolve(FAR_NAME).rcode == Rcode.YXDOMAIN
    assert resolve(f"secure.{ORIGIN}", "DS").authoritative


def test_a_signed_dname_chain_to_a_missing_name_proves_it_does_not_exist(signed: World) -> None:
    msg = signed.ask(f"nope.old.{ORIGIN}", "A", dnssec_ok=True)
    assert msg.rcode() == dns.rcode.NOERROR  # RFC 9824 compact denial, as for names asked directly
    nsec = next(r for r in msg.authority if r.rdtype == dns.rdatatype.NSEC)
    assert nsec.name == dns.name.from_text(f"nope.new.{ORIGIN}") and "NXNAME" in nsec.to_text()
    signed.validate(nsec, msg)
    signed.validate(msg.answer[0], msg)  # the DNAME


def test_a_signed_dname_chain_to_nodata_proves_the_types_of_its_last_name(signed: World) -> None:
    msg = signed.ask(f"www.old.{ORIGIN}", "TXT", dnssec_ok=True)
    assert msg.rcode() == dns.rcode.NOERROR
    nsec = next(r for r in msg.authority if r.rdtype == dns.rdatatype.NSEC)
    assert nsec.name == dns.name.from_text(f"www.new.{ORIGIN}")
    assert set(nsec[0].to_text().split()[1:]) == {"A", "RRSIG", "NSEC"}
    signed.validate(nsec, msg)


def test_a_signed_yxdomain_carries_the_signed_dname(signed: World) -> None:
    msg = signed.ask(FAR_NAME, "A", dnssec_ok=True)
    assert msg.rcode() == dns.rcode.YXDOMAIN
    signed.validate(msg.answer[0], msg)


def test_explain_says_a_name_is_delegated_or_below_a_dname() -> None:
    from gslbd.explain import explain

    config = load_config_text(CONFIG_TEXT)
    view = build_view(config, Snapshot(version=1), env())
    text = explain(config, view, env(), f"www.sub.{ORIGIN}", "A", "192.0.2.9")
    assert f"name: at or below the zone cut sub.{ORIGIN} -> referral (not authoritative)" in text
    assert "answer: NOERROR (referral)\n" in text
    assert f"  authority: sub.{ORIGIN} 300 IN NS ns1.sub.{ORIGIN}\n" in text
    text = explain(config, view, env(), f"www.old.{ORIGIN}", "A", "192.0.2.9")
    assert f"name: does not exist; below the DNAME at old.{ORIGIN} (RFC 6672)" in text


def test_a_service_of_a_services_file_below_a_cut_is_an_error_at_its_line(tmp_path: Path) -> None:
    from gslbd.config import check_config

    lines = [
        '{"name": "ok.cuts.example.", "endpoints": [{"address": "192.0.2.1"}]}',
        '{"name": "api.x.sub.cuts.example.", "endpoints": [{"address": "192.0.2.2"}]}',
    ]
    (tmp_path / "services.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "gslbd.yaml").write_text(CONFIG_TEXT + "services_file: services.jsonl\n")
    _, problems = check_config(tmp_path / "gslbd.yaml")
    found = [(Path(p.file).name, p.line, p.message) for p in problems if p.severity == "error"]
    message = (
        f"'api.x.sub.{ORIGIN}' is at or below the zone cut 'sub.{ORIGIN}': the child zone's servers answer it"
    )
    assert found == [("services.jsonl", 2, message)]


def test_referrals_and_dnames_survive_an_incremental_rebuild() -> None:
    config = load_config_text(CONFIG_TEXT)
    builder = AnswerBuilder(FakeClock())
    policy_env = env()
    _, table = builder.build(config, Snapshot(version=1), policy_env)
    down = {e.key: False for s in config.services for e in s.endpoints if s.name == f"lb.new.{ORIGIN}"}
    view2, table2 = builder.build(config, Snapshot(version=2, health=down), policy_env)
    assert table2.derived_from == table.serial  # an update, not a new compilation
    world = World(config)
    world.view, world.table = view2, table2
    world.python.swap(table2, view2)
    if world.native is not None:
        world.native.swap(table2, view2)
    assert texts(world.ask(f"www.sub.{ORIGIN}"), "authority") == SUB_NS
    assert texts(world.ask(f"sub.{ORIGIN}"), "authority") == SUB_NS
    lb = world.ask(f"lb.old.{ORIGIN}")
    assert [r.rdtype for r in lb.answer] == [
        dns.rdatatype.DNAME,
        dns.rdatatype.CNAME,
        dns.rdatatype.A,
    ]


def test_a_zone_nameserver_below_a_cut_is_a_located_error() -> None:
    text = CONFIG_TEXT.replace(
        f"{{name: ns1.{ORIGIN}, address: 192.0.2.53}}", f"{{name: ns3.sub.{ORIGIN}, address: 192.0.2.53}}"
    )
    _, problems = check_config_text(text)
    errors = [(p.line, p.path, p.message) for p in problems if p.severity == "error"]
    message = (
        f"the zone's nameserver 'ns3.sub.{ORIGIN}' is below the zone cut 'sub.{ORIGIN}': its address belongs "
        "to the child zone"
    )
    assert errors == [(4, "zones[0].nameservers", message)]
