"""`import_octodns`: dynamic A/AAAA/CNAME records of an octoDNS zone file (pools, rules with geos,
fallback chains, value status) become services that gslbd's own services-file reader loads, with a
report of what was not mapped; bad input is a located ImportFailure."""

from __future__ import annotations

from pathlib import Path

import pytest
from importer_support import DATA, by_name, load_with_gslbd

from gslbd.importers.octodns import import_octodns
from gslbd.importers.result import ImportFailure

MAIN = """\
site: {name: europe}
zones:
  - origin: example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
topology:
  networks:
    - {cidr: 192.0.2.0/24, locality: {region: eu}}
    - {cidr: 198.51.100.0/24, locality: {region: na-us-ca}}
"""


def imported() -> tuple[dict[str, dict[str, object]], list[str]]:
    text = (DATA / "example.com.yaml").read_text(encoding="utf-8")
    result = import_octodns("example.com.yaml", text, "example.com")
    return by_name(result.services), [str(item) for item in result.report]


def test_rules_with_geos_make_a_geo_service_with_one_site_per_pool_placed_in_the_geos_region() -> None:
    www = imported()[0]["www.example.com."]
    assert www["policy"] == "geo"
    assert www["ttl"] == 60
    assert www["endpoints"] == [
        {"address": "192.0.2.10", "site": "europe", "locality": {"region": "eu"}},
        {"address": "192.0.2.11", "site": "europe", "locality": {"region": "eu"}, "admin": "down"},
        {"address": "198.51.100.10", "site": "usa", "locality": {"region": "na-us-ca"}, "admin": "up"},
        {"address": "203.0.113.10", "site": "world"},
        {"address": "2001:db8::10", "site": "europe", "locality": {"region": "eu"}},  # the AAAA record
        {"address": "2001:db8:1::10", "site": "usa", "locality": {"region": "na-us-ca"}},
        {"address": "2001:db8:2::10", "site": "world"},
    ]
    assert (www["all_down"], www["fallback"]) == ("fallback", ["192.0.2.250"])  # the record's own values


def test_a_fallback_chain_without_geos_is_failover_in_the_order_of_the_chain() -> None:
    api = imported()[0]["api.example.com."]
    assert api == {
        "name": "api.example.com.",
        "policy": "failover",
        "failover_order": ["primary", "secondary"],
        "endpoints": [
            {"address": "api-a.example.net.", "site": "primary"},
            {"address": "api-b.example.net.", "site": "secondary"},
        ],
        "all_down": "fallback",
        "fallback": ["api-static.example.net."],
    }


def test_one_pool_with_unequal_weights_is_weighted_by_endpoint() -> None:
    split = imported()[0]["split.example.com."]
    assert split["policy"] == "weighted"
    assert split["endpoints"] == [
        {"address": "192.0.2.20", "site": "main", "weight": 3},
        {"address": "192.0.2.21", "site": "main"},
    ]


def test_the_report_names_record_and_field_of_everything_not_mapped() -> None:
    assert imported()[1] == [
        "record/@/A: dynamic: only dynamic A, AAAA and CNAME records are imported: not imported",
        "record/www/A: dynamic.rules[0].geos: for GeoIP clients give the site coordinates, e.g. "
        "sites.europe.coordinates: [50.0, 10.0]",
        "record/www/A: dynamic.rules[1].geos: for GeoIP clients give the site coordinates, e.g. "
        "sites.usa.coordinates: [45.0, -100.0]",
        "record/www/A: dynamic.rules[2]: a catch-all rule: geo answers an unplaced client with every "
        "endpoint, not only this pool",
        "record/www/A: dynamic.pools.europe.fallback: not kept: geo falls to the nearest site with healthy "
        "endpoints",
        "record/www/A: dynamic.pools.usa.fallback: not kept: geo falls to the nearest site with healthy "
        "endpoints",
        "record/www/AAAA: dynamic.rules[0].geos: for GeoIP clients give the site coordinates, e.g. "
        "sites.europe.coordinates: [50.0, 10.0]",
        "record/www/AAAA: dynamic.rules[1].geos: for GeoIP clients give the site coordinates, e.g. "
        "sites.usa.coordinates: [45.0, -100.0]",
        "record/www/AAAA: dynamic.rules[2]: a catch-all rule: geo answers an unplaced client with every "
        "endpoint, not only this pool",
        "record/split/A: octodns.healthcheck: not mapped: give the service a gslbd check",
        "record/mail/MX: type: only dynamic A, AAAA and CNAME records are imported: not imported",
    ]


def test_the_lines_load_with_gslbds_own_services_file_reader_without_a_problem(tmp_path: Path) -> None:
    text = (DATA / "example.com.yaml").read_text(encoding="utf-8")
    lines = import_octodns("example.com.yaml", text, "example.com.").lines()
    config, problems = load_with_gslbd(tmp_path, lines, MAIN)
    assert config is not None
    assert [str(p) for p in problems] == []
    www = next(s for s in config.services if s.name == "www.example.com.")
    assert [(e.address, e.site, e.locality.region, e.admin) for e in www.endpoints][:3] == [
        ("192.0.2.10", "europe", "eu", "obey"),
        ("192.0.2.11", "europe", "eu", "down"),
        ("198.51.100.10", "usa", "na-us-ca", "up"),
    ]


SEVERAL_GEOS = """\
app:
  type: A
  dynamic:
    pools:
      one: {values: [{value: 192.0.2.1}]}
      two: {values: [{value: 192.0.2.2}]}
    rules:
      - {geos: [EU, AS], pool: one}
      - {pool: two}
"""


def test_a_pool_with_several_geos_keeps_the_first_as_its_region_and_reports_the_rest() -> None:
    result = import_octodns("z.yaml", SEVERAL_GEOS, "example.com")
    first = {"address": "192.0.2.1", "site": "one", "locality": {"region": "eu"}}
    assert result.services[0]["endpoints"][0] == first
    assert str(result.report[0]) == (
        "record/app/A: dynamic.rules[0].geos: ['EU', 'AS']: an endpoint has one region; pool 'one' keeps 'eu'"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "www:\n  type: A\n  value: [1, 2\n",
            "z.yaml:4: invalid YAML: expected ',' or ']', but got '<stream end>'",
        ),
        ("www:\n  ttl: 60\n", "z.yaml:2: record 'www': needs a type"),
        (
            "a: {type: A}\n---\nb: {type: A}\n",
            "z.yaml:3: an octoDNS zone file is one mapping of record names",
        ),
        ("- www\n", "z.yaml:1: an octoDNS zone file is one mapping of record names"),
    ],
)
def test_bad_input_is_an_error_at_its_line(text: str, message: str) -> None:
    with pytest.raises(ImportFailure) as caught:
        import_octodns("z.yaml", text, "example.com")
    assert str(caught.value) == message


def test_a_ttl_that_is_not_a_number_is_reported_and_left_to_the_zone() -> None:
    result = import_octodns(
        "z.yaml", SEVERAL_GEOS.replace("  type: A\n", "  type: A\n  ttl: soon\n"), "example.com"
    )
    assert "ttl" not in result.services[0]
    assert str(result.report[-1]) == "record/app/A: ttl: 'soon' is not a TTL: the zone's ttl"
