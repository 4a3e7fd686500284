"""`safety:`: a list of rules read with their lines; bad rules are located errors."""

from __future__ import annotations

import pytest

from gslbd.config import check_config_text, load_config_text
from gslbd.model.config import SafetyRule

BASE = "version: 1\nzones: []\n"


def problems_of(text: str) -> list[str]:
    _, problems = check_config_text(BASE + text, "t.yaml")
    return [f"{p.severity}: {p}" for p in problems if p.severity == "error"]


def test_no_safety_rules_by_default() -> None:
    assert load_config_text(BASE).safety == ()


def test_rules_are_read_in_order_with_their_lines_and_default_glob() -> None:
    config = load_config_text(
        BASE + 'safety:\n  - {min_sites_up: 2, services: "app.*"}\n  - {min_endpoints_up: 1}\n'
    )
    assert config.safety == (
        SafetyRule(0, "app.*", min_sites_up=2),
        SafetyRule(1, "*", min_endpoints_up=1),
    )
    assert [r.line for r in config.safety] == [4, 5]
    assert config.safety[0].text() == 'safety[0] (min_sites_up: 2, services: "app.*")'
    assert config.safety[1].text() == 'safety[1] (min_endpoints_up: 1, services: "*")'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "safety:\n  - {min_sites_up: 2, sites: eu}\n",
            ["error: t.yaml:4: safety[0].sites: unknown key 'sites'; did you mean 'services'?"],
        ),
        (
            "safety:\n  - {min_sites_up: -1}\n",
            ["error: t.yaml:4: safety[0].min_sites_up: must be at least 0, got -1"],
        ),
        (
            "safety:\n  - {min_endpoints_up: 1}\n  - {min_endpoints_up: -2}\n",
            ["error: t.yaml:5: safety[1].min_endpoints_up: must be at least 0, got -2"],
        ),
        (
            'safety:\n  - {min_sites_up: 1, services: ""}\n',
            ["error: t.yaml:4: safety[0].services: must not be empty"],
        ),
        (
            'safety:\n  - {services: "*"}\n',
            ["error: t.yaml:4: safety[0]: a safety rule needs min_sites_up or min_endpoints_up"],
        ),
        ("safety: {min_sites_up: 2}\n", ["error: t.yaml:3: safety: expected a list, got a mapping"]),
        (
            "safety:\n  - {min_sites: 2}\n",
            [
                "error: t.yaml:4: safety[0].min_sites: unknown key 'min_sites'; did you mean 'min_sites_up'?",
                "error: t.yaml:4: safety[0]: a safety rule needs min_sites_up or min_endpoints_up",
            ],
        ),
        ("safety:\n  - 2\n", ["error: t.yaml:4: safety[0]: expected a mapping, got the integer 2"]),
        (
            "safety:\n  - {min_sites_up: two}\n",
            ["error: t.yaml:4: safety[0].min_sites_up: expected an integer, got the string 'two'"],
        ),
    ],
)
def test_bad_rules_are_located_errors(text: str, expected: list[str]) -> None:
    assert problems_of(text) == expected


@pytest.mark.parametrize(
    ("glob", "name", "covered"),
    [
        ("*", "app.gslb.example.com.", True),
        ("app.*", "app.gslb.example.com.", True),
        ("APP.*.", "app.gslb.example.com.", True),
        ("app.gslb.example.com", "app.gslb.example.com.", True),
        ("api.*", "app.gslb.example.com.", False),
    ],
)
def test_the_glob_covers_service_names_absolute_or_not(glob: str, name: str, covered: bool) -> None:
    assert SafetyRule(0, glob, min_sites_up=1).covers(name) is covered


def test_a_glob_that_covers_no_service_is_a_warning() -> None:
    text = (
        "zones: [{origin: gslb.example.com.}]\n"
        "services: [{name: app, endpoints: [{address: 192.0.2.1}]}]\n"
        'safety:\n  - {min_sites_up: 1, services: "api.*"}\n  - {min_sites_up: 1, services: "app.*"}\n'
    )
    config, problems = check_config_text("version: 1\n" + text, "t.yaml")
    assert config is not None
    assert [f"{p.severity}: {p}" for p in problems if "safety" in p.path] == [
        'warning: t.yaml:5: safety[0].services: "api.*" covers no configured service: the rule guards nothing'
    ]
