"""Health-check profiles, inline checks and `check: none`, and how endpoints inherit them."""

from __future__ import annotations

from gslbd.config import check_config_text, load_config_text
from gslbd.model import Check
from gslbd.types import CheckType

HEAD = """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]
checks:
  web: {type: http, port: 8080, path: /healthz}
  db: {type: tcp, port: 5432, send: "PING", expect: "PONG"}
"""
WEB = Check("web", CheckType.HTTP, port=8080, path="/healthz")
DB = Check("db", CheckType.TCP, port=5432, send="PING", expect="PONG")


def test_endpoints_inherit_the_service_check_and_may_override_it() -> None:
    config = load_config_text(
        HEAD
        + """\
services:
  - name: app
    check: web
    endpoints:
      - {address: 192.0.2.1}
      - {address: 192.0.2.2, check: db}
      - {address: 192.0.2.3, check: none}
      - {address: 192.0.2.4, check: {type: icmp, count: 3}}
"""
    )
    assert [e.check for e in config.services[0].endpoints] == [
        WEB,
        DB,
        None,
        Check("app.gslb.example.com.#192.0.2.4", CheckType.ICMP, count=3),
    ]


def test_inline_service_check_is_named_after_the_service() -> None:
    config = load_config_text(
        HEAD
        + """\
services:
  - name: app
    check:
      type: https
      host: app.example.com
      expect_status: 204
      tls_verify: false
      headers: {Authorization: Bearer x}
      interval: 10s
      timeout: 3s
      rise: 1
      fall: 5
    endpoints: [{address: 192.0.2.1}, {address: 192.0.2.2, check: web}]
"""
    )
    first, second = config.services[0].endpoints
    assert first.check == Check(
        name="app.gslb.example.com.#inline",
        type=CheckType.HTTPS,
        interval=10.0,
        timeout=3.0,
        rise=1,
        fall=5,
        host="app.example.com",
        expect_status=(204,),
        tls_verify=False,
        headers=(("Authorization", "Bearer x"),),
    )
    assert second.check == WEB


def test_no_check_anywhere_and_check_none_mean_no_probe() -> None:
    config = load_config_text(
        HEAD
        + """\
services:
  - {name: a, endpoints: [{address: 192.0.2.1}]}
  - {name: b, check: none, endpoints: [{address: 192.0.2.2}, {address: 192.0.2.3, check: web}]}
"""
    )
    a, b = config.services
    assert [e.check for e in a.endpoints] == [None]
    assert [e.check for e in b.endpoints] == [None, WEB]


def test_dns_and_exec_check_keys() -> None:
    config = load_config_text(
        """\
checks:
  resolver: {type: dns, port: 5353, query: Health.Example.Com, qtype: aaaa, expect_rcode: nxdomain,
             expect_answer: "2001:db8::1"}
  script: {type: exec, command: [/usr/bin/check, --fast], port: 443}
"""
    )
    resolver, script = config.checks
    assert resolver == Check(
        "resolver",
        CheckType.DNS,
        port=5353,
        query="health.example.com.",
        qtype="AAAA",
        expect_rcode="NXDOMAIN",
        expect_answer="2001:db8::1",
    )
    assert script == Check("script", CheckType.EXEC, port=443, command=("/usr/bin/check", "--fast"))


def test_unused_profiles_are_warned_about_and_errors_in_profiles_are_not_repeated_at_use() -> None:
    config, problems = check_config_text(
        HEAD
        + """\
  broken: {type: http, port: 99999}
services:
  - {name: app, check: broken, endpoints: [{address: 192.0.2.1, check: missing}]}
"""
    )
    assert config is None
    assert [str(p) for p in problems] == [
        "<string>:5: checks.broken.port: must be between 1 and 65535, got 99999",
        "<string>:7: services[0].endpoints[0].check: unknown check profile 'missing'; "
        "defined: broken, db, web",
        "<string>:3: checks.web: check profile is never used",
        "<string>:4: checks.db: check profile is never used",
    ]


def test_none_is_not_a_profile_name_and_check_must_be_a_name_or_mapping() -> None:
    _, problems = check_config_text(
        """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]
checks:
  none: {type: tcp, port: 1}
services:
  - {name: app, check: 5, endpoints: [{address: 192.0.2.1, check: web}]}
"""
    )
    assert [str(p) for p in problems] == [
        "<string>:3: checks.none: 'none' cannot be a profile name: `check: none` means no check",
        "<string>:5: services[0].check: expected a profile name, an inline mapping or none, "
        "got the integer 5",
        "<string>:5: services[0].endpoints[0].check: unknown check profile 'web'; "
        "no profiles are defined under checks",
    ]


def test_window_and_initial_are_read_and_window_defaults_to_consecutive_failures() -> None:
    config = load_config_text(
        """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]
checks:
  web: {type: http, port: 8080, fall: 3, window: 10, initial: down}
  plain: {type: tcp, port: 5432}
services:
  - {name: app, check: web, endpoints: [{address: 192.0.2.1}, {address: 192.0.2.2, check: plain}]}
"""
    )
    web, plain = (e.check for e in config.services[0].endpoints)
    assert web is not None and (web.fall, web.window, web.initial) == (3, 10, False)
    assert plain is not None and (plain.window, plain.initial) == (0, True)


def test_a_window_smaller_than_fall_or_too_large_and_an_unknown_initial_are_located_errors() -> None:
    _, problems = check_config_text(
        """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]
checks:
  a: {type: tcp, port: 1, fall: 3, window: 2}
  b: {type: tcp, port: 1, window: 65}
  c: {type: tcp, port: 1, initial: sideways}
services:
  - {name: app, endpoints: [{address: 192.0.2.1, check: a}, {address: 192.0.2.2, check: b},
                            {address: 192.0.2.3, check: c}]}
"""
    )
    assert [str(p) for p in problems] == [
        "<string>:3: checks.a.window: window (2) must be at least fall (3)",
        "<string>:4: checks.b.window: must be between 1 and 64, got 65",
        "<string>:5: checks.c.initial: unknown initial state 'sideways'; valid: up | down",
    ]


def test_a_push_check_has_a_ttl_that_is_its_interval_and_takes_no_probe_keys() -> None:
    config = load_config_text(
        """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]
checks:
  pushed: {type: push, ttl: 20s, fall: 2}
services:
  - {name: app, check: pushed, endpoints: [{address: 192.0.2.1}, {address: 192.0.2.2, check: {type: push}}]}
"""
    )
    first, second = (e.check for e in config.services[0].endpoints)
    assert first is not None and (first.type, first.interval, first.fall) == (CheckType.PUSH, 20.0, 2)
    assert second is not None and second.interval == 30.0
    _, problems = check_config_text(
        """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]
checks:
  pushed: {type: push, interval: 5s, port: 80}
services:
  - {name: app, check: pushed, endpoints: [{address: 192.0.2.1}]}
"""
    )
    assert [str(p) for p in problems] == [
        "<string>:3: checks.pushed.interval: 'interval' does not apply to type push",
        "<string>:3: checks.pushed.port: 'port' does not apply to type push",
    ]
