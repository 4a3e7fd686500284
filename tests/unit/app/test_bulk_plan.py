"""The plan of a bulk admin change: every endpoint the selector picks, and only those whose admin state
(run-time override, else the config's) is not the asked one are changed."""

from __future__ import annotations

import pytest

from gslbd.app.bulk import plan
from gslbd.app.whatif import SelectorMatchesNothing
from gslbd.model.selector import Selector
from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import Locality
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState, EndpointKind

APP = "app.example.com."


def ep(address: str, site: str, admin: AdminState = AdminState.OBEY, tags: tuple[str, ...] = ()) -> Endpoint:
    return Endpoint(APP, address, EndpointKind.IPV4, site, Locality(), admin=admin, tags=tags)


SERVICE = Service(
    name=APP,
    zone="example.com.",
    label="app",
    endpoints=(
        ep("192.0.2.1", "eu", tags=("canary",)),
        ep("192.0.2.2", "eu", admin=AdminState.DOWN),
        ep("192.0.2.3", "eu"),
        ep("198.51.100.1", "us", tags=("canary",)),
    ),
)


def test_every_picked_endpoint_is_matched_and_only_those_not_in_the_state_change() -> None:
    snapshot = Snapshot(admin={(APP, "192.0.2.3"): AdminState.DOWN})
    found = plan([SERVICE], snapshot, Selector(site="eu"), AdminState.DOWN)
    assert found.matched == ((APP, "192.0.2.1"), (APP, "192.0.2.2"), (APP, "192.0.2.3"))
    assert found.changes == {(APP, "192.0.2.1"): AdminState.DOWN}


def test_a_run_time_override_counts_before_the_config_admin_state() -> None:
    snapshot = Snapshot(admin={(APP, "192.0.2.2"): AdminState.UP})
    found = plan([SERVICE], snapshot, Selector(site="eu"), AdminState.OBEY)
    assert found.changes == {(APP, "192.0.2.2"): AdminState.OBEY}
    found = plan([SERVICE], Snapshot(), Selector(site="eu"), AdminState.OBEY)
    assert found.changes == {(APP, "192.0.2.2"): AdminState.OBEY}  # the config's down


def test_tags_and_site_are_combined() -> None:
    found = plan([SERVICE], Snapshot(), Selector(site="us", tags=("canary",)), AdminState.DOWN)
    assert found.changes == {(APP, "198.51.100.1"): AdminState.DOWN}


def test_a_selector_that_picks_nothing_is_refused() -> None:
    with pytest.raises(SelectorMatchesNothing, match=r"^selector site=ap matches no endpoint$"):
        plan([SERVICE], Snapshot(), Selector(site="ap"), AdminState.DOWN)
