"""The exchange zone of a signed public zone is its own unsigned child, delegated insecurely.

Every question at or below `_gslbd-exchange-<site>.<origin>` gets the exchange hook's unsigned,
authoritative answer, the same with and without DO and CO, from the C table and the Python fast path
alike; DS at the exchange apex is the parent's: a signed NODATA whose NSEC lists NS RRSIG NSEC (the proof
of an insecure delegation), validated with dnspython. Transfers and TSIG-signed peer traffic are as
before (test_exchange_xfr_messages.py)."""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path

import dns.dnssec
import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from exchange_support import SERVICES, env

from gslbd.answer.exchange_names import published
from gslbd.clock import FakeClock
from gslbd.config import check_config_text
from gslbd.config.dnssec import generate_key_pair
from gslbd.exchange.xfrserve import ExchangeZones
from gslbd.model.config import Config
from gslbd.server.build import AnswerBuilder
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder, ctable

ZONE = "gslb.test."
APEX = "_gslbd-exchange-eu.gslb.test."
CLIENT = int(ipaddress.IPv4Address("127.0.0.1"))
NAMESERVERS = {"gslb-ns-eu-gslb.test.", "gslb-ns-us-gslb.test."}
PEERS = '  sites:\n    - {name: us, nameservers: ["127.0.0.3:5300"]}\n'


def config_text(dnssec: str, peers: str = PEERS) -> str:
    return f"""\
site: {{name: eu}}
dns: {{listen: ["127.0.0.1:5353"]}}
zones:
  - origin: {ZONE}
    nameservers:
      - {{name: gslb-ns-eu-gslb.test., address: 127.0.0.2}}
      - {{name: gslb-ns-us-gslb.test., address: 127.0.0.3}}
{dnssec}sites:
  eu: {{locality: {{region: europe}}}}
  us: {{locality: {{region: america}}}}
  ap: {{locality: {{region: asia}}}}
services:
{SERVICES}peers:
{peers}"""


def load(text: str, base: Path) -> Config:
    config, problems = check_config_text(text, "c.yaml", base)
    assert config is not None, [str(p) for p in problems]
    return config


class Site:
    """One site's answers: the Python responder and (when compiled) the C one, with the exchange hook."""

    def __init__(self, config: Config) -> None:
        self.clock = FakeClock()
        snapshot = Snapshot(version=1, evaluated_at=self.clock.wall())
        view, table = AnswerBuilder(self.clock).build(config, snapshot, env(config))
        self.zones = ExchangeZones(config, published(config, snapshot), self.clock.wall(), lambda *a: None)
        self.responders = [Responder(table, view, random.Random(3), native=False)]
        if ctable.AVAILABLE:
            self.responders.append(Responder(table, view, random.Random(3), native=True))
        for responder in self.responders:
            responder.on_exchange = self.zones.handle
        self.keyset: dns.rrset.RRset | None = None

    def ask(self, name: str, rtype: str, flags: int = 0) -> dns.message.Message:
        """The response to a query (`flags`: the EDNS flags, DO and CO), the same bytes from every path."""
        msg = dns.message.make_query(name, rtype, use_edns=0, ednsflags=flags, payload=1232)
        msg.id = 7
        wire = msg.to_wire()
        outs = {r.handle(wire, CLIENT, False) for r in self.responders}
        assert len(outs) == 1, f"{name} {rtype}: the C table and Python differ"
        out = outs.pop()
        assert out is not None
        return dns.message.from_wire(out)


DO = dns.flags.DO
CO = 0x4000  # RFC 9824 Compact Answers OK, the bit after DO
FORMS = {"no DO": 0, "DO": DO, "DO+CO": DO | CO}


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Site:
    base = tmp_path_factory.mktemp("keys")
    key = generate_key_pair(ZONE, 13, True, base)
    site = Site(load(config_text(f"    dnssec: {{keys: [{key.name}]}}\n"), base))
    site.keyset = site.ask(ZONE, "DNSKEY", DO).answer[0]
    return site


def records(msg: dns.message.Message) -> list[tuple[str, list[str]]]:
    return [
        (section, sorted(rrset.to_text().splitlines()))
        for section, rrsets in (("answer", msg.answer), ("authority", msg.authority), ("add", msg.additional))
        for rrset in rrsets
    ]


@pytest.mark.parametrize(
    ("name", "rtype"),
    [
        (APEX, "SOA"),
        (APEX, "NS"),
        (APEX, "TXT"),
        (APEX, "A"),
        ("app." + APEX, "A"),
        ("app." + APEX, "AAAA"),
        ("app." + APEX, "TXT"),
        ("nothing." + APEX, "A"),
        ("deep.app." + APEX, "A"),
    ],
)
def test_exchange_names_answer_the_same_unsigned_authoritative_records_with_and_without_do(
    signed: Site, name: str, rtype: str
) -> None:
    answers = {form: signed.ask(name, rtype, flags) for form, flags in FORMS.items()}
    plain = answers["no DO"]
    assert plain.flags & dns.flags.AA
    for form, msg in answers.items():
        assert msg.rcode() == plain.rcode(), form
        assert records(msg) == records(plain), form
        sent = [rrset.rdtype for section in msg.sections[1:] for rrset in section]
        assert dns.rdatatype.RRSIG not in sent and dns.rdatatype.NSEC not in sent, form
    if rtype == "SOA":
        assert plain.answer[0].rdtype == dns.rdatatype.SOA
        assert plain.additional[0].name.to_text() == "heartbeat-eu.gslb.test."
    if rtype == "NS":
        assert {r.to_text() for r in plain.answer[0]} == NAMESERVERS
    if name == "app." + APEX and rtype in ("A", "AAAA"):
        assert [r.to_text() for r in plain.answer[0]] == (["192.0.2.1"] if rtype == "A" else ["2001:db8::1"])
    if name.startswith(("nothing.", "deep.")):
        assert plain.rcode() == dns.rcode.NXDOMAIN
        assert plain.authority[0].name.to_text() == APEX


def test_ds_at_the_exchange_apex_is_the_parents_signed_proof_of_an_insecure_delegation(signed: Site) -> None:
    msg = signed.ask(APEX, "DS", DO)
    assert msg.rcode() == dns.rcode.NOERROR and msg.flags & dns.flags.AA and not msg.answer
    nsec = next(r for r in msg.authority if r.rdtype == dns.rdatatype.NSEC)
    assert nsec.name == dns.name.from_text(APEX)
    assert sorted(nsec[0].to_text().split()[1:]) == ["NS", "NSEC", "RRSIG"]
    sig = next(r for r in msg.authority if r.rdtype == dns.rdatatype.RRSIG and r.covers == dns.rdatatype.NSEC)
    assert signed.keyset is not None
    dns.dnssec.validate(nsec, sig, {dns.name.from_text(ZONE): signed.keyset}, now=signed.clock.wall())
    plain = signed.ask(APEX, "DS")  # the parent's NODATA, its SOA
    assert plain.rcode() == dns.rcode.NOERROR and not plain.answer
    assert plain.authority[0].name.to_text() == ZONE


def test_the_cut_is_made_only_for_signed_zones_of_a_site_serving_its_exchange_zone(tmp_path: Path) -> None:
    key = generate_key_pair(ZONE, 13, True, tmp_path)
    signing = f"    dnssec: {{keys: [{key.name}]}}\n"
    cut = [(r.name, r.rtype) for r in load(config_text(signing), tmp_path).zones[0].records]
    assert cut == [(APEX, "NS"), (APEX, "NS")]
    assert not load(config_text(""), tmp_path).zones[0].records  # unsigned: the hook answers as before
    no_transfer = PEERS + "  transfer: false\n"
    assert not load(config_text(signing, no_transfer), tmp_path).zones[0].records  # no exchange zone


def test_the_nsec_chain_links_the_exchange_cut_with_its_ns_bit(tmp_path: Path) -> None:
    key = generate_key_pair(ZONE, 13, True, tmp_path)
    site = Site(load(config_text(f"    dnssec: {{keys: [{key.name}], denial_signing_rate: 0}}\n"), tmp_path))
    msg = site.ask("_h.gslb.test.", "A", DO)  # sorts after the exchange apex: its link covers it
    assert msg.rcode() == dns.rcode.NXDOMAIN
    nsecs = [r for r in msg.authority if r.rdtype == dns.rdatatype.NSEC]
    links = {r.name.to_text(): r[0].to_text().split() for r in nsecs}
    assert sorted(links[APEX][1:]) == ["NS", "NSEC", "RRSIG"], links
    assert not any(name.endswith("." + APEX) for name in links)  # no name of the child in the chain
