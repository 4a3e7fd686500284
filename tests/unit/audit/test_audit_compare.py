"""The audit's pure core: which questions a run asks (plan.py) and which answers differ between sites
(compare.py), with the reply-to-answer-set step of ask.py and the CLI's table."""

from __future__ import annotations

import json
import random

import dns.message
import dns.rcode
import dns.rrset
import pytest

from gslbd.audit.ask import AuditResult, answer_of
from gslbd.audit.compare import Divergence, compare, confirmed, divergent_services
from gslbd.audit.plan import Question, chosen, questions
from gslbd.cli.audit import as_json, table
from gslbd.config import load_config_text

CONFIG = """\
version: 1
site: {name: eu}
zones:
  - origin: gslb.test.
    nameservers: [{name: ns1.gslb.test., address: 127.0.0.2}]
topology:
  networks:
    - {cidr: 10.2.0.0/16, site: us}
    - {cidr: 10.1.0.0/16, site: eu}
services:
  - name: rr
    endpoints: [{address: 192.0.2.1, site: eu}, {address: "2001:db8::1", site: eu}]
  - name: fo
    policy: failover
    failover_order: [eu]
    endpoints: [{address: 192.0.2.2, site: eu}]
  - name: "*.apps"
    endpoints: [{address: www.example.net., site: eu}]
"""


def q(service: str = "rr.gslb.test.", network: str | None = None, rtype: str = "A") -> Question:
    return Question(service, service, rtype, network)


A1, A2 = frozenset({"A 192.0.2.1"}), frozenset({"A 192.0.2.2"})


def test_questions_ask_each_type_without_ecs_and_with_each_topology_network() -> None:
    asked = questions(load_config_text(CONFIG), 0, random.Random(1), tries=4)
    assert [(x.name, x.rtype, x.network, x.tries) for x in asked] == [
        (name, rtype, net, tries)
        for name, rtype, tries in (
            ("rr.gslb.test.", "A", 4),
            ("rr.gslb.test.", "AAAA", 4),
            ("fo.gslb.test.", "A", 1),  # failover answers the same every time: asked once
            ("audit-probe.apps.gslb.test.", "A", 4),  # a wildcard is asked at a name below it
        )
        for net in (None, "10.1.0.0/16", "10.2.0.0/16")
    ]


def test_no_ecs_questions_when_the_topology_ignores_client_subnets() -> None:
    text = CONFIG.replace("topology:\n", "topology:\n  use_client_subnet: false\n")
    assert {x.network for x in questions(load_config_text(text), 0, random.Random(1))} == {None}


def test_a_sample_is_that_many_services_drawn_by_the_seed_in_config_order() -> None:
    services = load_config_text(CONFIG).services
    picked = [s.name for s in chosen(services, 2, random.Random(7))]
    assert picked == [s.name for s in chosen(services, 2, random.Random(7))]
    assert len(picked) == 2 and picked == [s.name for s in services if s.name in picked]
    draws = {tuple(s.name for s in chosen(services, 2, random.Random(seed))) for seed in range(20)}
    assert len(draws) == 3  # every pair comes up: the seed decides
    assert chosen(services, 0, random.Random(1)) == list(services)
    assert chosen(services, 9, random.Random(1)) == list(services)


def test_equal_answer_sets_are_no_divergence_whatever_the_order_they_came_in() -> None:
    answers = {q(): {"eu": A1 | A2, "us": A2 | A1, "ap": frozenset({"A 192.0.2.2", "A 192.0.2.1"})}}
    assert compare("eu", answers) == []


def test_each_peer_that_answers_another_set_is_a_divergence_against_the_reference() -> None:
    answers = {
        q(network="10.1.0.0/16"): {"eu": A1, "us": A2, "ap": A1},
        q(): {"eu": A1, "us": A1, "ap": frozenset({"no reply"})},
        q("fo.gslb.test."): {"us": A1, "ap": A2},  # the reference never answered: nothing to judge
    }
    assert compare("eu", answers) == [
        Divergence(q(), "eu", "ap", A1, frozenset({"no reply"})),
        Divergence(q(network="10.1.0.0/16"), "eu", "us", A1, A2),
    ]


def test_only_divergences_seen_again_after_the_staleness_bound_are_confirmed() -> None:
    first = [Divergence(q(), "eu", "us", A1, A2), Divergence(q(network="10.1.0.0/16"), "eu", "us", A1, A2)]
    later = Divergence(q(), "eu", "us", A1, frozenset({"NXDOMAIN"}))
    new = Divergence(q("fo.gslb.test."), "eu", "us", A1, A2)  # not seen in the first pass
    assert confirmed(first, [later, new]) == [later]
    assert confirmed(first, []) == []


def test_divergent_services_count_services_per_peer_and_zero_for_peers_that_agree() -> None:
    found = [
        Divergence(q(), "eu", "us", A1, A2),
        Divergence(q(network="10.1.0.0/16"), "eu", "us", A1, A2),
        Divergence(q("fo.gslb.test."), "eu", "us", A1, A2),
    ]
    assert divergent_services(found, ["us", "ap"]) == {"us": 2, "ap": 0}


def _reply(rcode: int = dns.rcode.NOERROR, *records: tuple[str, str]) -> dns.message.Message:
    reply = dns.message.make_response(dns.message.make_query("rr.gslb.test.", "A"))
    reply.set_rcode(rcode)
    for rtype, value in records:
        reply.answer.append(dns.rrset.from_text("rr.gslb.test.", 30, "IN", rtype, value))
    return reply


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (_reply(dns.rcode.NOERROR, ("A", "192.0.2.1"), ("A", "192.0.2.2")), {"A 192.0.2.1", "A 192.0.2.2"}),
        (_reply(dns.rcode.NOERROR, ("CNAME", "www.example.net.")), {"CNAME www.example.net."}),
        (_reply(dns.rcode.NOERROR), {"NODATA"}),
        (_reply(dns.rcode.NXDOMAIN), {"NXDOMAIN"}),
        (_reply(dns.rcode.SERVFAIL), {"SERVFAIL"}),
    ],
)
def test_a_reply_becomes_its_records_or_its_rcode(reply: dns.message.Message, expected: set[str]) -> None:
    assert answer_of(reply) == expected


def test_the_table_and_the_json_name_the_service_the_network_and_both_answer_sets() -> None:
    found = (
        Divergence(q(), "eu", "us", A1, A1 | A2),
        Divergence(q(network="10.1.0.0/16"), "eu", "us", A1, frozenset({"no reply"})),
    )
    result = AuditResult("eu", ("eu", "us"), 6, found)
    assert table(result) == (
        "rr.gslb.test.\n"
        "  client network  type  eu         site  answer\n"
        "  (no ECS)        A     192.0.2.1  us    192.0.2.1, 192.0.2.2\n"
        "  10.1.0.0/16     A     192.0.2.1  us    no reply"
    )
    report = json.loads(as_json(result))
    assert report["divergent_services"] == ["rr.gslb.test."]
    assert report["divergent_services_per_peer"] == {"us": 1}
    assert report["divergences"][0] == {
        "service": "rr.gslb.test.",
        "name": "rr.gslb.test.",
        "type": "A",
        "client_network": None,
        "site_a": "eu",
        "answer_a": ["A 192.0.2.1"],
        "site_b": "us",
        "answer_b": ["A 192.0.2.1", "A 192.0.2.2"],
    }
