"""Locality names in the config check: names that would collide with another name of the zone are errors."""

from __future__ import annotations

import pytest

from gslbd.config import check_config_text
from gslbd.config.locality import Level, levels, locality_name, site_localities
from gslbd.model.service import Service
from gslbd.model.topology import Locality

# Lines 1-5; the services start on line 6.
HEAD = """\
site: {name: eu, locality: {region: eu-west, zone: eu-west-b}}
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
    records: [{name: api.eu-west, type: TXT, value: "x"}]
"""


def errors_of(text: str) -> list[str]:
    config, problems = check_config_text(text, "c.yaml")
    errors = [str(p) for p in problems if p.severity == "error"]
    assert (config is None) == bool(errors)
    return errors


def test_locality_names_are_label_zone_region_origin() -> None:
    service = Service("app.team.gslb.example.com.", "gslb.example.com.", "app.team")
    assert locality_name(service, "eu-west") == "app.team.eu-west.gslb.example.com."
    assert locality_name(service, "eu-west", "eu-west-b") == "app.team.eu-west-b.eu-west.gslb.example.com."
    found = levels(
        service,
        [
            Locality("eu-west", "eu-west-b"),
            Locality(None, "lost"),
            Locality("us-east"),
            Locality("eu-west", "eu-west-c"),
        ],
    )
    assert found == (
        Level("app.team.eu-west.gslb.example.com.", "eu-west", None),
        Level("app.team.us-east.gslb.example.com.", "us-east", None),
        Level("app.team.eu-west-b.eu-west.gslb.example.com.", "eu-west", "eu-west-b"),
        Level("app.team.eu-west-c.eu-west.gslb.example.com.", "eu-west", "eu-west-c"),
    )


def test_a_valid_config_with_locality_names_loads_and_every_site_declares_its_locality() -> None:
    text = HEAD + (
        "sites:\n  us: {locality: {region: us-east}}\n"
        "services:\n  - name: app\n    locality_names: true\n    endpoints: [{address: 192.0.2.1}]\n"
    )
    config, problems = check_config_text(text, "c.yaml")
    assert config is not None and problems == []
    assert site_localities(config) == (Locality("eu-west", "eu-west-b"), Locality("us-east"))


COLLISIONS: list[tuple[str, str, list[str]]] = [
    (
        "a static record",
        "services:\n  - name: api\n    locality_names: true\n    endpoints: [{address: 192.0.2.1}]\n",
        [
            "c.yaml:8: services[0].locality_names: locality name 'api.eu-west.gslb.example.com.' (region "
            "eu-west) is also a static record (zones[0].records[0]); rename one of them or the region"
        ],
    ),
    (
        "another service",
        "services:\n  - name: app\n    locality_names: true\n    endpoints: [{address: 192.0.2.1}]\n"
        "  - name: app.eu-west-b.eu-west\n    endpoints: [{address: 192.0.2.2}]\n",
        [
            "c.yaml:8: services[0].locality_names: locality name 'app.eu-west-b.eu-west.gslb.example.com.' "
            "(zone eu-west-b of region eu-west) is also the service "
            "'app.eu-west-b.eu-west.gslb.example.com.'; rename one of them or the zone"
        ],
    ),
    (
        "another service's locality name",
        "services:\n  - name: app\n    locality_names: true\n    endpoints: [{address: 192.0.2.1}]\n"
        "  - name: app.eu-west-b\n    locality_names: true\n    endpoints: [{address: 192.0.2.2}]\n",
        [
            "c.yaml:11: services[1].locality_names: locality name 'app.eu-west-b.eu-west.gslb.example.com.' "
            "(region eu-west) is also a locality name of service 'app.gslb.example.com.'; rename one of them "
            "or the region"
        ],
    ),
]


@pytest.mark.parametrize(("case", "services", "expected"), COLLISIONS, ids=[c[0] for c in COLLISIONS])
def test_a_locality_name_that_is_another_name_of_the_zone_is_an_error(
    case: str, services: str, expected: list[str]
) -> None:
    assert errors_of(HEAD + services) == expected, case


def test_a_locality_name_that_is_a_nameserver_is_an_error() -> None:
    text = HEAD.replace("[{name: ns1, address: 127.0.0.2}]", "[{name: ns1.eu-west, address: 127.0.0.2}]") + (
        "services:\n  - name: ns1\n    locality_names: true\n    endpoints: [{address: 192.0.2.1}]\n"
    )
    assert errors_of(text) == [
        "c.yaml:8: services[0].locality_names: locality name 'ns1.eu-west.gslb.example.com.' "
        "(region eu-west) is also a nameserver of zone 'gslb.example.com.'; rename one of them or the region"
    ]


def test_a_locality_name_inside_a_more_specific_served_zone_is_an_error() -> None:
    text = HEAD.replace('    records: [{name: api.eu-west, type: TXT, value: "x"}]\n', "") + (
        "  - origin: eu-west.gslb.example.com.\n    nameservers: [{name: ns1.gslb.example.com.}]\n"
        "services:\n  - name: app\n    zone: gslb.example.com.\n    locality_names: true\n"
        "    endpoints: [{address: 192.0.2.1}]\n"
    )
    assert errors_of(text) == [
        "c.yaml:10: services[0].locality_names: locality name 'app.eu-west.gslb.example.com.' "
        "(region eu-west) is inside the more specific zone 'eu-west.gslb.example.com.'; "
        "rename one of them or the region",
        "c.yaml:10: services[0].locality_names: locality name "
        "'app.eu-west-b.eu-west.gslb.example.com.' (zone eu-west-b of region eu-west) is inside "
        "the more specific zone 'eu-west.gslb.example.com.'; rename one of them or the zone",
    ]


def test_without_locality_names_the_same_names_are_fine() -> None:
    assert errors_of(HEAD + "services:\n  - name: api\n    endpoints: [{address: 192.0.2.1}]\n") == []


def test_a_locality_name_longer_than_a_dns_name_is_an_error() -> None:
    region, zone = "r" * 63, "z" * 63
    text = (
        f"site: {{name: eu, locality: {{region: {region}, zone: {zone}}}}}\n"
        "zones:\n  - origin: gslb.example.com.\n    nameservers: [{name: ns1, address: 127.0.0.2}]\n"
        f"services:\n  - name: {'a' * 50}.{'b' * 60}\n    locality_names: true\n"
        "    endpoints: [{address: 192.0.2.1}]\n"
    )
    name = f"{'a' * 50}.{'b' * 60}.{zone}.{region}.gslb.example.com."
    assert errors_of(text) == [
        f"c.yaml:7: services[0].locality_names: locality name '{name}' (zone {zone} of region {region}) is "
        "longer than a DNS name can be (255 bytes); rename one of them or the zone"
    ]
