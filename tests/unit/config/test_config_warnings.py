"""Suspicious but valid configurations load, with warnings that say what looks wrong."""

from __future__ import annotations

import pytest

from gslbd.config import check_config_text

ZONE = """\
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
"""

WARNINGS: list[tuple[str, str, list[str]]] = [
    (
        "weights on a policy that is not weighted",
        ZONE + "services:\n  - name: app\n    policy: geo\n    weights: {eu: 1}\n"
        "    endpoints: [{address: 192.0.2.1, site: eu}]\n"
        "topology: {networks: [{cidr: 10.0.0.0/8, site: eu}]}\n",
        ["c.yaml:7: services[0].weights: weights are only used by the weighted policy (policy is geo)"],
    ),
    (
        "failover_order on a policy that is not failover",
        ZONE + "services:\n  - name: app\n    failover_order: [eu]\n"
        "    endpoints: [{address: 192.0.2.1, site: eu}]\n",
        [
            "c.yaml:6: services[0].failover_order: failover_order is only used by the failover policy "
            "(policy is round_robin)"
        ],
    ),
    (
        "a failover site that no endpoint has",
        ZONE + "services:\n  - name: app\n    policy: failover\n    failover_order:\n      - eu\n      - us\n"
        "    endpoints: [{address: 192.0.2.1, site: eu}]\n",
        ["c.yaml:9: services[0].failover_order[1]: no endpoint has site 'us'"],
    ),
    (
        "a weighted site that no endpoint has",
        ZONE + "services:\n  - name: app\n    policy: weighted\n    weights:\n      eu: 1\n      us: 2\n"
        "    endpoints: [{address: 192.0.2.1, site: eu}]\n",
        ["c.yaml:9: services[0].weights.us: no endpoint has site 'us'"],
    ),
    (
        "bias on a policy that is not geo",
        ZONE + "services:\n  - name: app\n    bias: {eu: 10}\n"
        "    endpoints: [{address: 192.0.2.1, site: eu}]\n",
        ["c.yaml:6: services[0].bias: bias is only used by the geo policy (policy is round_robin)"],
    ),
    (
        "a biased site that no endpoint has",
        ZONE + "services:\n  - name: app\n    policy: geo\n    bias:\n      eu: 10\n      us: -20\n"
        "    endpoints: [{address: 192.0.2.1, site: eu}]\n"
        "topology: {networks: [{cidr: 10.0.0.0/8, site: eu}]}\n",
        ["c.yaml:9: services[0].bias.us: no endpoint has site 'us'"],
    ),
    (
        "select first_n on round_robin, where it changes nothing",
        ZONE + "services:\n  - name: app\n    select: first_n\n    endpoints: [{address: 192.0.2.1}]\n",
        [
            "c.yaml:6: services[0].select: select: first_n is the same as rotate for policy round_robin: its"
            " order already holds every candidate"
        ],
    ),
    (
        "hostname and IP endpoints mixed",
        ZONE + "services:\n  - name: app\n    endpoints:\n      - address: 192.0.2.1\n"
        "      - address: app.example.net.\n",
        [
            "c.yaml:6: services[0].endpoints: mixes hostname and IP endpoints: "
            "a hostname picked first is answered alone (CNAME)"
        ],
    ),
    (
        "fallback without all_down: fallback",
        ZONE + "services:\n  - name: app\n    fallback: [192.0.2.9]\n    endpoints: [{address: 192.0.2.1}]\n",
        [
            "c.yaml:6: services[0].fallback: "
            "fallback is only used with all_down: fallback (all_down is serve_all)"
        ],
    ),
    (
        "geo without any way to locate clients",
        ZONE + "services:\n  - name: app\n    policy: geo\n    endpoints: [{address: 192.0.2.1}]\n",
        [
            "c.yaml:6: services[0].policy: geo policy, but topology has no networks and no geoip database "
            "to locate clients"
        ],
    ),
    (
        "an API open to the network without a token",
        ZONE + "api: {listen: '0.0.0.0:8080'}\n",
        ["c.yaml:4: api.listen: no token: anyone who reaches 0.0.0.0:8080 can change state through the API"],
    ),
    (
        "a zone without nameservers",
        "zones:\n  - origin: gslb.example.com.\n",
        ["c.yaml:2: zones[0].nameservers: no nameservers: the zone has no NS records"],
    ),
    (
        "a site locality that contradicts site.locality",
        "site: {name: eu, locality: {region: europe-west1}}\n"
        + ZONE
        + "sites:\n  eu: {locality: {region: eu-2}}\n",
        ["c.yaml:6: sites.eu.locality: differs from site.locality, which wins for this site ('eu')"],
    ),
    (
        "a min_healthy count larger than every site's endpoints",
        ZONE + "services:\n  - name: app\n    min_healthy: 3\n"
        "    endpoints: [{address: 192.0.2.1, site: eu}, {address: 192.0.2.2, site: eu}, "
        "{address: 192.0.2.3, site: us}]\n",
        [
            "c.yaml:6: services[0].min_healthy: min_healthy 3 is more than any site has endpoints (at most "
            "2): every site counts as below it, so every healthy endpoint is answered"
        ],
    ),
    (
        "peers without sites",
        ZONE + "peers: {interval: 5s}\n",
        ["c.yaml:4: peers.sites: no peer sites: the exchange has nothing to poll"],
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(t, e) for _, t, e in WARNINGS], ids=[i for i, _, _ in WARNINGS]
)
def test_suspicious_config_loads_with_a_warning(text: str, expected: list[str]) -> None:
    config, problems = check_config_text(text, "c.yaml")
    assert config is not None
    assert all(p.severity == "warning" for p in problems)
    assert [str(p) for p in problems] == expected
