"""An endpoint with several checks as the API, the status page and `gslbd status` show it: the combined
verdict with each check's own beside it; an endpoint with one check is shown as before."""

from __future__ import annotations

from gslbd.api.control import Health, endpoint_view, service_status
from gslbd.api.render import endpoint_json, status_page
from gslbd.cli.admin import status_rows
from gslbd.model.check import Check, CheckSet
from gslbd.model.service import Endpoint, Service
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState, CheckType, EndpointKind, HealthMode

WEB = Check("web", CheckType.HTTP, port=80)
DB = Check("db", CheckType.TCP, port=5432)
ENDPOINT = Endpoint(
    "app.example.", "192.0.2.10", EndpointKind.IPV4, "eu", checks=CheckSet((WEB, DB), HealthMode.ALL)
)
DOWN = EndpointStatus(healthy=False, last_change=5.0, last_change_reason="2 consecutive failures: HTTP 503")
UP = EndpointStatus(healthy=True)


def test_the_json_has_the_health_mode_and_each_checks_verdict_and_a_single_check_is_unchanged() -> None:
    combined = EndpointStatus(healthy=False, last_change_reason="health all: web down (...)")
    view = endpoint_view(ENDPOINT, combined, AdminState.OBEY, False, checks=[("web", DOWN), ("db", UP)])
    assert view.health is Health.DOWN and view.check == "all of http, tcp"
    data = endpoint_json(view)
    assert data["health_mode"] == "all"
    assert [(c["name"], c["type"], c["health"]) for c in data["checks"]] == [
        ("web", "http", "down"),
        ("db", "tcp", "up"),
    ]
    assert data["checks"][0]["last_change"]["reason"] == "2 consecutive failures: HTTP 503"
    single = Endpoint("app.example.", "192.0.2.11", EndpointKind.IPV4, "eu", check=WEB)
    plain = endpoint_json(endpoint_view(single, UP, AdminState.OBEY, True))
    assert "checks" not in plain and "health_mode" not in plain and plain["check"] == "http"
    rows = status_rows([{"name": "app.example.", "endpoints": [data, plain]}])
    assert [row[3] for row in rows] == ["down (all: web down, db up)", "up"]
    page = status_page([service_status(Service("app.example.", "example.", "app"), [view])], True)
    assert "all: web down, db up" in page
