"""services[].pools and rules: read into the model, and every mistake reported at its line and field."""

from __future__ import annotations

import ipaddress

import pytest

from gslbd.config import check_config_text, load_config_text
from gslbd.model.service import Pool, Rule

HEAD = """\
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
topology: {networks: [{cidr: 10.1.0.0/16, site: eu}]}
services:
  - name: app
    endpoints:
      - {address: 192.0.2.1, site: eu}
      - {address: 198.51.100.1, site: us}
"""
GOOD = (
    HEAD
    + """\
    pools:
      europe: {sites: [eu], fallback: america, min_healthy: 1}
      america: {endpoints: [198.51.100.1]}
    rules:
      - {sites: [eu], countries: [DE, FR], pool: europe}
      - {networks: [172.16.0.0/12], continents: [EU], pool: europe}
      - {pool: america}
"""
)


def test_pools_and_rules_are_read_into_the_service() -> None:
    service = load_config_text(GOOD).services[0]
    assert service.pools == (
        Pool("europe", ("eu",), (), "america", 1),
        Pool("america", (), ("198.51.100.1",), None, 1),
    )
    assert service.rules == (
        Rule("europe", sites=("eu",), countries=("DE", "FR")),
        Rule("europe", networks=(ipaddress.ip_network("172.16.0.0/12"),), continents=("EU",)),
        Rule("america"),
    )


ERRORS = [
    (
        "a rule names a pool that does not exist",
        "    pools: {a: {sites: [eu]}}\n    rules:\n      - {sites: [eu], pool: a}\n      - {pool: b}\n",
        ["c.yaml:13: services[0].rules[1].pool: unknown pool 'b'; pools: a"],
    ),
    (
        "a loop in the fallbacks",
        "    pools:\n      a: {sites: [eu], fallback: b}\n      b: {sites: [us], fallback: a}\n"
        "    rules:\n      - {pool: a}\n",
        [
            "c.yaml:11: services[0].pools.a.fallback: loop in pool fallbacks: a -> b -> a",
            "c.yaml:12: services[0].pools.b.fallback: loop in pool fallbacks: b -> a -> b",
        ],
    ),
    (
        "an unused pool",
        "    pools:\n      a: {sites: [eu]}\n      b: {sites: [us]}\n    rules:\n      - {pool: a}\n",
        ["c.yaml:12: services[0].pools.b: unused pool 'b': no rule or fallback sends clients to it"],
    ),
    (
        "no catch-all last",
        "    pools: {a: {sites: [eu]}}\n    rules:\n      - {sites: [eu], pool: a}\n",
        [
            "c.yaml:12: services[0].rules[0]: the last rule must be a catch-all (only `pool`), so that every "
            "client reaches a pool"
        ],
    ),
    (
        "a catch-all before the end",
        "    pools: {a: {sites: [eu]}}\n    rules:\n      - {pool: a}\n      - {pool: a}\n",
        [
            "c.yaml:12: services[0].rules[0]: a catch-all rule (only `pool`) must be last: the rules after "
            "it never match"
        ],
    ),
    (
        "a pool address that is not an endpoint",
        "    pools: {a: {endpoints: [192.0.2.99]}}\n    rules:\n      - {pool: a}\n",
        ["c.yaml:10: services[0].pools.a.endpoints[0]: 192.0.2.99 is not an endpoint of this service"],
    ),
    (
        "a pool with nothing in it",
        "    pools: {a: {fallback: a}}\n    rules:\n      - {pool: a}\n",
        [
            "c.yaml:10: services[0].pools.a: a pool needs sites or endpoints",
            "c.yaml:10: services[0].pools.a.fallback: loop in pool fallbacks: a -> a",
        ],
    ),
    (
        "an asn condition without an ASN database",
        "    pools: {a: {sites: [eu]}}\n    rules:\n      - {asn: [64500], pool: a}\n      - {pool: a}\n",
        ["c.yaml:12: services[0].rules[0].asn: an asn condition needs topology.geoip.asn_database"],
    ),
    (
        "a bad country and continent",
        "    pools: {a: {sites: [eu]}}\n    rules:\n      - {countries: [de], continents: [XX], pool: a}\n"
        "      - {pool: a}\n",
        [
            "c.yaml:12: services[0].rules[0].countries[0]: invalid country 'de'; must be an ISO 3166-1 "
            "alpha-2 code such as DE",
            "c.yaml:12: services[0].rules[0].continents[0]: invalid continent 'XX'; valid: AF, AN, AS, EU, "
            "NA, OC, SA",
        ],
    ),
    (
        "rules without pools",
        "    rules:\n      - {pool: a}\n",
        ["c.yaml:10: services[0].rules: rules need pools to send clients to"],
    ),
    (
        "pools without rules",
        "    pools: {a: {sites: [eu]}}\n",
        ["c.yaml:10: services[0].pools: pools need rules that send clients to them"],
    ),
]


@pytest.mark.parametrize(("extra", "expected"), [(e, x) for _, e, x in ERRORS], ids=[i for i, _, _ in ERRORS])
def test_pool_mistakes_are_reported_exactly(extra: str, expected: list[str]) -> None:
    config, problems = check_config_text(HEAD + extra, "c.yaml")
    assert config is None
    assert [str(p) for p in problems if p.severity == "error"] == expected
