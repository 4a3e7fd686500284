"""`endpoints[].checks: [a, b]` with `health: all|any` (and `services[].health`), and its located errors."""

from __future__ import annotations

from gslbd.config import check_config_text, load_config_text
from gslbd.model import Check
from gslbd.model.check import CheckSet
from gslbd.types import CheckType, HealthMode

HEAD = """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]
checks:
  web: {type: http, port: 8080, path: /healthz}
  db: {type: tcp, port: 5432}
  beat: {type: push, ttl: 30s}
"""
WEB = Check("web", CheckType.HTTP, port=8080, path="/healthz")
DB = Check("db", CheckType.TCP, port=5432)


def test_checks_name_several_profiles_and_health_defaults_to_all_then_the_service_then_the_endpoint() -> None:
    config = load_config_text(
        HEAD
        + """\
services:
  - name: app
    check: web
    endpoints:
      - {address: 192.0.2.1, checks: [web, db]}
      - {address: 192.0.2.2, checks: [db, beat], health: any}
      - {address: 192.0.2.3}
  - name: other
    health: any
    endpoints:
      - {address: 192.0.2.4, checks: [web, db]}
      - {address: 192.0.2.5, checks: [web, db], health: all}
"""
    )
    app, other = config.services
    first, second, third = app.endpoints
    assert first.check is None and first.checks == CheckSet((WEB, DB), HealthMode.ALL)
    assert second.checks is not None and second.checks.names == ("db", "beat")
    assert second.checks.health is HealthMode.ANY
    assert third.check == WEB and third.checks is None  # a single check keeps today's meaning
    assert [e.checks.health for e in other.endpoints if e.checks] == [HealthMode.ANY, HealthMode.ALL]


def test_check_with_checks_an_unknown_name_an_empty_list_and_a_bad_health_are_located_errors() -> None:
    _, problems = check_config_text(
        HEAD
        + """\
services:
  - name: app
    health: most
    endpoints:
      - {address: 192.0.2.1, check: web, checks: [web, db]}
      - {address: 192.0.2.2, checks: [web, dbb]}
      - {address: 192.0.2.3, checks: []}
      - {address: 192.0.2.4, checks: [web, web, none], health: every}
      - {address: 192.0.2.5, checks: web}
      - {address: 192.0.2.6, checks: [{type: tcp, port: 1}]}
"""
    )
    assert [str(p) for p in problems if p.severity == "error"] == [
        "<string>:8: services[0].health: unknown health mode 'most'; valid: all | any",
        "<string>:10: services[0].endpoints[0].checks: check and checks cannot both be given: "
        "one check is `check: NAME`, several `checks: [a, b]`",
        "<string>:11: services[0].endpoints[1].checks[1]: unknown check profile 'dbb'; did you mean 'db'?",
        "<string>:12: services[0].endpoints[2].checks: the list is empty: name at least one check profile "
        "(or leave checks out)",
        "<string>:13: services[0].endpoints[3].health: unknown health mode 'every'; valid: all | any",
        "<string>:13: services[0].endpoints[3].checks[1]: check profile 'web' is listed twice",
        "<string>:13: services[0].endpoints[3].checks[2]: 'none' is not a check profile: "
        "leave checks out for no check",
        "<string>:14: services[0].endpoints[4].checks: expected a list of check profile names, "
        "got the string 'web'",
        "<string>:15: services[0].endpoints[5].checks[0]: expected a check profile name, got a mapping",
    ]


def test_health_on_an_endpoint_with_one_check_is_a_located_warning() -> None:
    config, problems = check_config_text(
        HEAD + "services:\n  - {name: app, endpoints: [{address: 192.0.2.1, check: web, health: any}]}\n"
    )
    assert config is not None and config.services[0].endpoints[0].check == WEB
    assert [(p.severity, str(p)) for p in problems if "health" in p.path] == [
        (
            "warning",
            "<string>:7: services[0].endpoints[0].health: health combines the endpoint's checks: [a, b]; "
            "with one check it changes nothing",
        )
    ]


def test_profiles_named_only_in_checks_lists_are_used() -> None:
    _, problems = check_config_text(
        HEAD + "services:\n  - {name: app, endpoints: [{address: 192.0.2.1, checks: [web, db, beat]}]}\n"
    )
    assert [str(p) for p in problems] == []
