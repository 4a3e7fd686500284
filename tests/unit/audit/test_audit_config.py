"""`audit: {every, sample}`: off when absent, defaults, and located errors."""

from __future__ import annotations

import pytest

from gslbd.config import check_config_text, load_config_text
from gslbd.model.config import AuditConfig

BASE = "version: 1\nzones: []\n"


def problems_of(text: str) -> list[str]:
    _, problems = check_config_text(BASE + text, "t.yaml")
    return [f"{p.severity}: {p}" for p in problems]


def test_the_periodic_audit_is_off_when_absent() -> None:
    assert load_config_text(BASE).audit is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("audit: {}", AuditConfig(60.0, 100)),
        ("audit: {every: 5m, sample: 0}", AuditConfig(300.0, 0)),
        ("audit: {every: 1s, sample: 10}", AuditConfig(1.0, 10)),
    ],
)
def test_audit_reads_every_and_sample(text: str, expected: AuditConfig) -> None:
    assert load_config_text(BASE + text + "\n").audit == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("audit: {every: 500ms}", "error: t.yaml:3: audit.every: must be at least 1s, got 0.5s"),
        ("audit: {sample: -1}", "error: t.yaml:3: audit.sample: must be between 0 and 100000, got -1"),
        (
            "audit: {often: 1s}",
            "error: t.yaml:3: audit.often: unknown key 'often'; valid keys: every, sample",
        ),
        ("audit: 60s", "error: t.yaml:3: audit: expected a mapping, got the string '60s'"),
    ],
)
def test_bad_audit_settings_are_located_errors(text: str, expected: str) -> None:
    found = problems_of(text + "\n")
    assert found == [expected]
