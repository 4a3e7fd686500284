"""Load feedback keys (endpoints[].load, services[].load, weight_from, shed_load): read into the model,
and every mistake reported at its line and dotted field."""

from __future__ import annotations

import pytest

from gslbd.config import check_config_text, load_config_text
from gslbd.model.load import LoadSource, OnMissing, ShedLoad, WeightFrom

HEAD = """\
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
services:
  - name: app
    policy: weighted
"""
ENDPOINTS = """\
    endpoints:
      - {address: 192.0.2.1}
      - address: 192.0.2.2
        load: {url: "http://192.0.2.2:9100/metrics", metric: node_load, on_missing: full}
"""


def test_a_services_load_applies_to_its_endpoints_and_an_endpoints_own_wins() -> None:
    text = (
        HEAD
        + """\
    weight_from: load
    shed_load: {low: 0.7, high: 0.9}
    load: {url: "http://{address}:9100/load", every: 10s, half_life: 30s}
"""
        + ENDPOINTS
    )
    service = load_config_text(text).services[0]
    assert service.weight_from is WeightFrom.LOAD
    assert service.shed_load == ShedLoad(0.7, 0.9)
    first, second = service.endpoints
    assert first.load == LoadSource("http://{address}:9100/load", 10.0, 2.0, None, 30.0, OnMissing.KEEP)
    assert first.load.url_for(first.address) == "http://192.0.2.1:9100/load"
    assert second.load == LoadSource(
        "http://192.0.2.2:9100/metrics", 5.0, 2.0, "node_load", 15.0, OnMissing.FULL
    )


def test_without_load_keys_nothing_changes() -> None:
    service = load_config_text(HEAD + "    endpoints: [{address: 192.0.2.1}]\n").services[0]
    assert service.weight_from is WeightFrom.CONFIG
    assert service.shed_load is None
    assert service.endpoints[0].load is None


ERRORS = [
    (
        "low above high",
        '    shed_load: {low: 0.9, high: 0.5}\n    load: {url: "http://{address}/load"}\n',
        [
            "c.yaml:7: services[0].shed_load.low: low 0.9 is not below high 0.5: "
            + "the share falls between the two"
        ],
    ),
    (
        "a load without url",
        "    load: {every: 5s}\n",
        ["c.yaml:7: services[0].load.url: required key is missing"],
    ),
    (
        "a url that is not http",
        "    load: {url: ftp://x/load}\n",
        ["c.yaml:7: services[0].load.url: expected an http:// or https:// URL, got 'ftp://x/load'"],
    ),
    (
        "a timeout longer than the interval",
        '    load: {url: "http://{address}/", every: 1s, timeout: 3s}\n',
        ["c.yaml:7: services[0].load.timeout: timeout 3s is longer than every 1s"],
    ),
    (
        "a bad metric name and on_missing",
        '    load: {url: "http://{address}/", metric: "a-b", on_missing: drop}\n',
        [
            "c.yaml:7: services[0].load.metric: 'a-b' is not a Prometheus metric name"
            " ([a-zA-Z_:][a-zA-Z0-9_:]*)",
            "c.yaml:7: services[0].load.on_missing: unknown on_missing 'drop'; valid: keep | full | ignore",
        ],
    ),
    (
        "weight_from load without a load source",
        "    weight_from: load\n",
        [
            "c.yaml:7: services[0].weight_from: weight_from: load needs a load source: services[].load or "
            "endpoints[].load"
        ],
    ),
    (
        "shed_load without a load source",
        "    shed_load: {low: 0.5, high: 0.8}\n",
        [
            "c.yaml:7: services[0].shed_load: shed_load needs a load source: "
            + "services[].load or endpoints[].load"
        ],
    ),
    (
        "an unknown key in load",
        '    load: {url: "http://{address}/", evry: 5s}\n',
        ["c.yaml:7: services[0].load.evry: unknown key 'evry'; did you mean 'every'?"],
    ),
]


@pytest.mark.parametrize(("extra", "expected"), [(e, x) for _, e, x in ERRORS], ids=[i for i, _, _ in ERRORS])
def test_load_mistakes_are_reported_exactly(extra: str, expected: list[str]) -> None:
    config, problems = check_config_text(
        HEAD + extra + "    endpoints: [{address: 192.0.2.1}, {address: 192.0.2.2}]\n", "c.yaml"
    )
    assert config is None
    assert [str(p) for p in problems if p.severity == "error"] == expected


def test_an_endpoints_bad_load_is_located_at_the_endpoint() -> None:
    text = HEAD + "    endpoints:\n      - {address: 192.0.2.1, load: {url: nope}}\n"
    config, problems = check_config_text(text, "c.yaml")
    assert config is None
    assert [str(p) for p in problems if p.severity == "error"] == [
        "c.yaml:8: services[0].endpoints[0].load.url: expected an http:// or https:// URL, got 'nope'"
    ]


def test_one_url_for_every_endpoint_is_a_warning() -> None:
    text = (
        HEAD
        + "    load: {url: http://lb/load}\n    endpoints: [{address: 192.0.2.1}, {address: 192.0.2.2}]\n"
    )
    config, problems = check_config_text(text, "c.yaml")
    assert config is not None
    assert [str(p) for p in problems] == [
        "c.yaml:7: services[0].load.url: every endpoint reads the same URL: write {address} where "
        "the endpoint's address goes"
    ]


def test_weight_from_load_with_site_weights_is_an_error() -> None:
    text = HEAD + (
        '    weight_from: load\n    weights: {eu: 1}\n    load: {url: "http://{address}/"}\n'
        "    endpoints: [{address: 192.0.2.1, site: eu}]\n"
    )
    config, problems = check_config_text(text, "c.yaml")
    assert config is None
    assert [str(p) for p in problems if p.severity == "error"] == [
        "c.yaml:7: services[0].weight_from: weight_from: load weighs endpoints by their load; it cannot be "
        "used with site weights"
    ]
