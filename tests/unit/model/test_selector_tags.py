"""A selector's `tags` (every tag must be on the endpoint), its JSON form and the config's `tags`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gslbd.config import load_config
from gslbd.errors import ConfigError
from gslbd.model.selector import Selector, parse_admin, selector_of
from gslbd.model.service import Endpoint
from gslbd.model.topology import Locality
from gslbd.types import EndpointKind

CANARY = Endpoint("app.example.com.", "192.0.2.1", EndpointKind.IPV4, "eu", Locality(), tags=("canary", "r1"))
PLAIN = Endpoint("app.example.com.", "192.0.2.2", EndpointKind.IPV4, "eu", Locality())
US = Endpoint("app.example.com.", "198.51.100.1", EndpointKind.IPV4, "us", Locality(), tags=("canary",))


def picked(selector: Selector) -> list[str]:
    return [e.address for e in (CANARY, PLAIN, US) if selector.matches(e)]


def test_every_tag_of_the_selector_must_be_on_the_endpoint() -> None:
    assert picked(Selector(tags=("canary",))) == ["192.0.2.1", "198.51.100.1"]
    assert picked(Selector(tags=("canary", "r1"))) == ["192.0.2.1"]
    assert picked(Selector(tags=("canary",), site="us")) == ["198.51.100.1"]
    assert picked(Selector(tags=("nope",))) == []


def test_the_text_form_takes_tag_with_commas() -> None:
    change = parse_admin("tag=canary,r1 site=eu down")
    assert change.selector == Selector(site="eu", tags=("canary", "r1"))
    assert change.selector.text() == "site=eu tag=canary,r1"


def test_a_json_selector_is_read_and_written_back() -> None:
    selector = selector_of({"site": "eu", "tags": ["canary"], "address": "192.0.2.0/24"})
    assert selector == Selector(site="eu", address="192.0.2.0/24", tags=("canary",))
    assert selector.json() == {"site": "eu", "address": "192.0.2.0/24", "tags": ["canary"]}


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({}, "an empty selector would change every endpoint; name a key"),
        ({"rack": "a"}, "selector: unknown key 'rack' (keys: site, region, service, address, tags)"),
        ({"site": 1}, "selector.site must be a non-empty string"),
        ({"site": " "}, "selector.site must be a non-empty string"),
        ({"tags": "canary"}, "selector.tags must be a non-empty list of tags"),
        ({"tags": []}, "selector.tags must be a non-empty list of tags"),
        (["site"], 'selector must be an object like {"site": "eu"}'),
    ],
)
def test_a_bad_json_selector_names_the_fault(given: object, error: str) -> None:
    with pytest.raises(ValueError) as caught:
        selector_of(given)
    assert str(caught.value) == error


CONFIG = """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 192.0.2.53}]}]
services:
  - name: app.gslb.example.com.
    endpoints:
      - {address: 192.0.2.1, tags: [canary, canary, r1]}
      - {address: 192.0.2.2, tags: [ok, "bad tag", 3]}
"""


def test_config_tags_are_read_and_a_bad_one_is_located(tmp_path: Path) -> None:
    path = tmp_path / "gslbd.yaml"
    path.write_text(CONFIG)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert f"{path}:6: services[0].endpoints[1].tags[1]: invalid tag 'bad tag'" in text
    assert f"{path}:6: services[0].endpoints[1].tags[2]: expected a tag (a string), got" in text
    path.write_text(CONFIG.replace('[ok, "bad tag", 3]', "[ok]"))
    config = load_config(path)
    assert [e.tags for e in config.services[0].endpoints] == [("canary", "r1"), ("ok",)]
