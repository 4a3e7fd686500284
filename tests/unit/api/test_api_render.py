"""How endpoint state is turned into API values: health words, admin, effective state, times."""

from __future__ import annotations

from api_support import APP, WEB

from gslbd.api.control import EndpointView, Health, endpoint_view
from gslbd.api.render import endpoint_json, iso_time
from gslbd.model.service import Endpoint
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState, EndpointKind


def test_iso_time_is_utc_with_milliseconds_and_none_stays_none() -> None:
    assert iso_time(0.0) == "1970-01-01T00:00:00.000Z"
    assert iso_time(1_700_000_000.25) == "2023-11-14T22:13:20.250Z"
    assert iso_time(None) is None


def test_endpoint_view_names_the_verdict_up_down_or_unknown() -> None:
    endpoint = Endpoint(APP, "192.0.2.1", EndpointKind.IPV4, "eu", check=WEB)
    never = endpoint_view(endpoint, None, AdminState.OBEY, True)
    assert never == EndpointView(
        address="192.0.2.1",
        site="eu",
        health=Health.UNKNOWN,
        admin=AdminState.OBEY,
        effective_up=True,
        check="http",
    )
    down = endpoint_view(endpoint, EndpointStatus(healthy=False), AdminState.UP, True)
    assert (down.health, down.admin, down.effective_up) == (Health.DOWN, AdminState.UP, True)
    up = endpoint_view(endpoint, EndpointStatus(healthy=True), AdminState.DOWN, False)
    assert (up.health, up.effective_up) == (Health.UP, False)


def test_endpoint_json_has_null_history_before_the_first_probe() -> None:
    endpoint = Endpoint(APP, "backup.example.net.", EndpointKind.HOSTNAME, "eu")
    assert endpoint_json(endpoint_view(endpoint, None, AdminState.OBEY, True)) == {
        "address": "backup.example.net.",
        "site": "eu",
        "region": None,
        "zone": None,
        "check": None,
        "health": "unknown",
        "admin": "obey",
        "effective_up": True,
        "last_check": None,
        "last_change": None,
        "weight": 1,
        "source": "config",
        "patched": [],
    }
