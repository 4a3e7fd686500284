"""The endpoint overlay: config services + overlay -> services (config/overlay.py) and the changes the
API makes to it (config/overlay_change.py), validated by the config's own endpoint reader."""

from __future__ import annotations

import pytest

from gslbd.config import load_config_text
from gslbd.config.overlay import merge
from gslbd.config.overlay_change import OverlayRefused, add, patch, remove
from gslbd.model.config import Config
from gslbd.model.overlay import OverlayEntry, OverlayOp, entry_json, entry_of
from gslbd.types import CheckType

APP = "app.gslb.example.com."
TEXT = """\
version: 1
site: {name: eu}
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1.gslb.example.com., address: 192.0.2.53}]
checks:
  web: {type: http, interval: 5s, timeout: 1s}
sites:
  us: {locality: {region: us-east}}
services:
  - name: app
    policy: weighted
    check: web
    endpoints:
      - {address: 192.0.2.10, site: eu}
      - {address: 198.51.100.10, site: us, weight: 2}
  - name: plain
    endpoints: [{address: 192.0.2.20}]
"""


@pytest.fixture(scope="module")
def config() -> Config:
    return load_config_text(TEXT, "t.yaml")


def endpoints(config: Config, name: str = APP) -> dict[str, tuple[str, int]]:
    service = next(s for s in config.services if s.name == name)
    return {e.address: (e.site, e.weight) for e in service.endpoints}


def test_an_empty_overlay_gives_the_config_itself(config: Config) -> None:
    assert merge(config, {}).config is config


def test_an_added_endpoint_is_read_as_the_config_reads_one_and_gets_the_services_check(
    config: Config,
) -> None:
    overlay, key, problems = add(config, {}, APP, {"address": "203.0.113.7", "site": "us", "weight": 3})
    assert key == (APP, "203.0.113.7") and problems == []
    merged = merge(config, overlay)
    service = next(s for s in merged.config.services if s.name == APP)
    added = service.endpoints[-1]
    assert (added.address, added.site, added.weight) == ("203.0.113.7", "us", 3)
    assert added.locality.region == "us-east"  # the site's locality, as for a config endpoint
    assert added.check is not None and added.check.type is CheckType.HTTP  # the service's `check: web`
    assert merged.added == frozenset({key}) and merged.dropped == ()


def test_an_ipv6_address_is_kept_in_normal_form(config: Config) -> None:
    overlay, key, _ = add(config, {}, APP, {"address": "2001:DB8:0::7"})
    assert key == (APP, "2001:db8::7")
    assert overlay[key].fields["address"] == "2001:db8::7"


def test_a_new_site_becomes_a_known_site(config: Config) -> None:
    overlay, _, _ = add(config, {}, APP, {"address": "203.0.113.8", "site": "ap"})
    assert merge(config, overlay).config.site_info("ap") is not None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"address": "203.0.113.7", "weight": 5000},
            "not changed: invalid endpoint: weight: must be between 0 and 1000, got 5000",
        ),
        (
            {"address": "not an address"},
            "not changed: invalid endpoint: address: 'not an address' is neither",
        ),
        ({"site": "eu"}, "not changed: invalid endpoint: address: required key is missing"),
        (
            {"address": "203.0.113.7", "check": "nope"},
            "not changed: invalid endpoint: check: unknown check profile 'nope'",
        ),
        (
            {"address": "203.0.113.7", "wieght": 2},
            "not changed: invalid endpoint: wieght: unknown key 'wieght'; did you mean 'weight'?",
        ),
        (
            {"address": "203.0.113.7", "check": {"type": "http", "interval": "1s", "timeout": "2s"}},
            "not changed: invalid endpoint: check.timeout: timeout (2s) must be shorter than interval (1s)",
        ),
        ("192.0.2.1", "not changed: invalid endpoint: an endpoint must be a mapping"),
        (
            {"address": "203.0.113.7", "check": {"type": "exec", "command": ["/bin/true"]}},
            "not changed: invalid endpoint: check.type: an inline exec check is not taken from the API",
        ),
    ],
)
def test_an_invalid_endpoint_is_refused_with_422_naming_the_field(
    config: Config, value: object, message: str
) -> None:
    with pytest.raises(OverlayRefused) as caught:
        add(config, {}, APP, value)
    assert caught.value.status == 422
    assert str(caught.value).startswith(message)


def test_every_problem_is_named_at_once(config: Config) -> None:
    with pytest.raises(OverlayRefused) as caught:
        add(config, {}, APP, {"address": "203.0.113.7", "weight": -1, "priority": "x"})
    assert [p.path for p in caught.value.problems] == ["weight", "priority"]


def test_unknown_service_is_404_and_existing_address_409(config: Config) -> None:
    with pytest.raises(OverlayRefused) as caught:
        add(config, {}, "nope.gslb.example.com.", {"address": "203.0.113.7"})
    assert (caught.value.status, str(caught.value)) == (404, "no service nope.gslb.example.com.")
    with pytest.raises(OverlayRefused) as caught:
        add(config, {}, APP, {"address": "192.0.2.10"})
    assert caught.value.status == 409
    assert str(caught.value) == f"service {APP} has endpoint 192.0.2.10 already (in the config)"
    overlay, _, _ = add(config, {}, APP, {"address": "203.0.113.7"})
    with pytest.raises(OverlayRefused) as caught:
        add(config, overlay, APP, {"address": "203.0.113.7"})
    assert caught.value.status == 409


def test_removing_a_config_endpoint_is_a_mark_and_adding_it_again_restores_it(config: Config) -> None:
    overlay, key, _ = remove(config, {}, APP, "192.0.2.10")
    assert overlay == {key: OverlayEntry(OverlayOp.REMOVE)}
    merged = merge(config, overlay)
    assert endpoints(merged.config) == {"198.51.100.10": ("us", 2)}
    assert [e.address for e in merged.removed[APP]] == ["192.0.2.10"]
    with pytest.raises(OverlayRefused) as caught:
        remove(config, overlay, APP, "192.0.2.10")
    assert caught.value.status == 404
    restored, _, _ = add(config, overlay, APP, {"address": "192.0.2.10"})
    assert restored == {}


def test_removing_an_added_endpoint_forgets_it_and_an_unknown_one_is_404(config: Config) -> None:
    overlay, _, _ = add(config, {}, APP, {"address": "203.0.113.7"})
    assert remove(config, overlay, APP, "203.0.113.7")[0] == {}
    with pytest.raises(OverlayRefused) as caught:
        remove(config, {}, APP, "203.0.113.99")
    assert (caught.value.status, str(caught.value)) == (404, f"service {APP} has no endpoint 203.0.113.99")


def test_a_patch_reweights_a_config_endpoint_and_null_takes_it_back(config: Config) -> None:
    overlay, key, _ = patch(config, {}, APP, "192.0.2.10", {"weight": 7})
    merged = merge(config, overlay)
    assert endpoints(merged.config)["192.0.2.10"] == ("eu", 7)
    assert merged.patched == {key: ("weight",)}
    overlay, _, _ = patch(config, overlay, APP, "192.0.2.10", {"site": "us"})
    assert overlay[key].fields == {"weight": 7, "site": "us"}
    service = next(s for s in merge(config, overlay).config.services if s.name == APP)
    assert service.endpoints[0].locality.region == "us-east"  # the new site's locality
    assert patch(config, overlay, APP, "192.0.2.10", {"weight": None, "site": None})[0] == {}


def test_a_patch_of_an_added_endpoint_changes_its_mapping(config: Config) -> None:
    overlay, key, _ = add(config, {}, APP, {"address": "203.0.113.7", "weight": 3})
    overlay, _, _ = patch(config, overlay, APP, "203.0.113.7", {"weight": 9})
    assert overlay[key] == OverlayEntry(OverlayOp.ADD, {"address": "203.0.113.7", "weight": 9})


@pytest.mark.parametrize(
    ("fields", "status", "message"),
    [
        (
            {"weight": 1001},
            422,
            "not changed: invalid endpoint: weight: must be between 0 and 1000, got 1001",
        ),
        (
            {"address": "192.0.2.11"},
            422,
            "not changed: invalid endpoint: address: the address cannot be patched",
        ),
        ({}, 422, "not changed: nothing to patch"),
        (
            {"colour": "red"},
            422,
            "not changed: invalid endpoint: colour: unknown key 'colour'; valid keys: site",
        ),
    ],
)
def test_a_bad_patch_is_refused(config: Config, fields: dict[str, object], status: int, message: str) -> None:
    with pytest.raises(OverlayRefused) as caught:
        patch(config, {}, APP, "192.0.2.10", fields)
    assert caught.value.status == status
    assert str(caught.value).startswith(message)


def test_patching_a_removed_or_unknown_endpoint_is_404(config: Config) -> None:
    overlay, _, _ = remove(config, {}, APP, "192.0.2.10")
    for given, address in ((overlay, "192.0.2.10"), ({}, "203.0.113.99")):
        with pytest.raises(OverlayRefused) as caught:
            patch(config, given, APP, address, {"weight": 2})
        assert caught.value.status == 404


def test_entries_a_new_config_does_not_allow_are_dropped_with_the_reason(config: Config) -> None:
    overlay = {
        (APP, "203.0.113.7"): OverlayEntry(OverlayOp.ADD, {"address": "203.0.113.7", "check": "web"}),
        (APP, "192.0.2.10"): OverlayEntry(OverlayOp.PATCH, {"weight": 4}),
        ("plain.gslb.example.com.", "192.0.2.20"): OverlayEntry(OverlayOp.REMOVE),
    }
    changed = load_config_text(
        TEXT.replace("  web: {type: http, interval: 5s, timeout: 1s}\n", "  tcp: {type: tcp, port: 80}\n")
        .replace("    check: web\n", "    check: tcp\n")
        .replace("  - name: plain\n    endpoints: [{address: 192.0.2.20}]\n", ""),
        "t.yaml",
    )
    merged = merge(changed, overlay)
    assert [d.text() for d in merged.dropped] == [
        f"add of {APP} 203.0.113.7 dropped: check: unknown check profile 'web'; defined: tcp",
        "remove of plain.gslb.example.com. 192.0.2.20 dropped: "
        "the config has no service plain.gslb.example.com.",
    ]
    assert merged.kept == {(APP, "192.0.2.10"): OverlayEntry(OverlayOp.PATCH, {"weight": 4})}
    assert endpoints(merged.config)["192.0.2.10"] == ("eu", 4)


def test_an_added_endpoint_the_config_now_has_is_dropped(config: Config) -> None:
    overlay = {(APP, "192.0.2.10"): OverlayEntry(OverlayOp.ADD, {"address": "192.0.2.10", "weight": 9})}
    merged = merge(config, overlay)
    assert [d.reason for d in merged.dropped] == ["the config has this endpoint now"]
    assert endpoints(merged.config)["192.0.2.10"] == ("eu", 1)


@pytest.mark.parametrize(
    "entry",
    [
        OverlayEntry(OverlayOp.ADD, {"address": "192.0.2.1", "tags": ["a"]}),
        OverlayEntry(OverlayOp.REMOVE),
        OverlayEntry(OverlayOp.PATCH, {"weight": 2}),
    ],
)
def test_an_entry_survives_its_json_form(entry: OverlayEntry) -> None:
    assert entry_of(entry_json(entry)) == entry


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"op": "drop"}, "unknown op 'drop'; valid: add, remove, patch"),
        ({"op": "add", "endpoint": {"site": "eu"}}, "op add needs a mapping 'endpoint' with an address"),
        ({"op": "patch"}, "op patch needs a mapping 'set'"),
        ([], 'expected {"op": "add" | "remove" | "patch", ...}'),
    ],
)
def test_a_broken_json_entry_is_a_value_error(value: object, message: str) -> None:
    with pytest.raises(
        ValueError, match="^" + message.replace("|", r"\|").replace("{", r"\{").replace("(", r"\(")
    ):
        entry_of(value)
