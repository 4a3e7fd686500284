"""dns.identity and dns.version: off unless configured, validated with file:line like every key."""

from __future__ import annotations

import pytest

from gslbd.config import check_config_text, load_config_text

ZONE = """\
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
"""


def errors_of(text: str) -> list[str]:
    _config, problems = check_config_text(text, "c.yaml")
    return [str(p) for p in problems if p.severity == "error"]


def test_identity_and_version_are_off_unless_configured() -> None:
    dns = load_config_text(ZONE).dns
    assert (dns.identity, dns.version) == (None, None)


def test_identity_and_version_are_read() -> None:
    dns = load_config_text(ZONE + 'dns:\n  identity: "ns1-w{worker}"\n  version: gslbd\n').dns
    assert (dns.identity, dns.version) == ("ns1-w{worker}", "gslbd")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dns:\n  identity: ''\n", "c.yaml:5: dns.identity: must not be empty"),
        ("dns:\n  identity: 7\n", "c.yaml:5: dns.identity: expected a string, got the integer 7"),
        (
            "dns:\n  identity: 'ns-{host}'\n",
            "c.yaml:5: dns.identity: unknown placeholder {host} in identity; the only one is {worker}",
        ),
        (
            "dns:\n  identity: 'ns-{worker'\n",
            "c.yaml:5: dns.identity: unbalanced brace in identity; the only placeholder is {worker}",
        ),
        (
            "dns:\n  version: '" + "v" * 251 + "'\n",
            "c.yaml:5: dns.version: version is 251 bytes; at most 250 (one TXT string)",
        ),
        ('dns:\n  version: "a\\tb"\n', "c.yaml:5: dns.version: version must be printable text"),
    ],
)
def test_invalid_identity_or_version_is_reported_with_its_line(text: str, expected: str) -> None:
    assert errors_of(ZONE + text) == [expected]
