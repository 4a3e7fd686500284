"""`--admin 'KEY=VALUE... STATE'`: parsed with located faults, matched with every key (AND)."""

from __future__ import annotations

import pytest

from gslbd.model.selector import AdminChange, Selector, parse_admin
from gslbd.model.service import Endpoint
from gslbd.model.topology import Locality
from gslbd.types import AdminState, EndpointKind


def endpoint(service: str, address: str, site: str, region: str | None = None) -> Endpoint:
    kind = EndpointKind.IPV6 if ":" in address else EndpointKind.IPV4
    if address.endswith("."):
        kind = EndpointKind.HOSTNAME
    return Endpoint(service, address, kind, site, Locality(region))


EU = endpoint("app.example.com.", "192.0.2.10", "eu", "europe-west1")
US = endpoint("app.example.com.", "198.51.100.10", "us", "us-east1")
EU_V6 = endpoint("api.example.com.", "2001:db8::10", "eu", "europe-west1")
LB = endpoint("web.example.com.", "lb.example.net.", "eu")


def test_keys_and_state_are_parsed() -> None:
    assert parse_admin("site=eu service=*.example.com down") == AdminChange(
        Selector(site="eu", service="*.example.com"), AdminState.DOWN
    )
    assert parse_admin("  region=us-east1   OBEY ").state is AdminState.OBEY


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("down", "'down': an empty selector would change every endpoint; name a key"),
        ("site=eu", "'site=eu': ends with no state (obey, up, down)"),
        ("", "'': ends with no state (obey, up, down)"),
        ("site=eu off", "'site=eu off': 'off' is not a state (obey, up, down)"),
        ("rack=x down", "'rack=x down': unknown key 'rack' (keys: tag, site, region, service, address)"),
        ("site=eu site=us up", "'site=eu site=us up': site given twice"),
        ("site= up", "'site= up': 'site=' is not KEY=VALUE"),
        ("eu up", "'eu up': 'eu' is not KEY=VALUE"),
    ],
)
def test_bad_changes_name_the_fault(text: str, error: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_admin(text)
    assert str(caught.value) == error


def matching(text: str) -> list[Endpoint]:
    selector = parse_admin(text).selector
    return [e for e in (EU, US, EU_V6, LB) if selector.matches(e)]


def test_every_key_must_match() -> None:
    assert matching("site=eu down") == [EU, EU_V6, LB]
    assert matching("site=eu region=europe-west1 down") == [EU, EU_V6]
    assert matching("site=eu service=app.* down") == [EU]
    assert matching("service=app.example.com. down") == [EU, US]  # with or without the final dot
    assert matching("service=app.example.com down") == [EU, US]
    assert matching("region=us-east1 site=eu down") == []


def test_address_is_a_network_or_else_a_text_prefix() -> None:
    assert matching("address=192.0.2.0/24 down") == [EU]
    assert matching("address=2001:db8::/32 down") == [EU_V6]
    assert matching("address=198.51.100.10 down") == [US]
    assert matching("address=lb. down") == [LB]
    assert matching("address=19 down") == [EU, US]
