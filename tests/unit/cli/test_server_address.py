"""The one parser for DNS servers named on the command line (doctor --parent-server, delegation --server)."""

from __future__ import annotations

import pytest

from gslbd.cli.delegation import DelegationError, resolve_server
from gslbd.cli.server_address import parse_server


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("192.0.2.1", ("192.0.2.1", 53)),
        ("192.0.2.1:5300", ("192.0.2.1", 5300)),
        ("[2001:db8::1]:5300", ("2001:db8::1", 5300)),
        ("2001:db8::1", ("2001:db8::1", 53)),
        ("ns.example.com", ("ns.example.com", 53)),
    ],
)
def test_parse_server_takes_host_and_optional_port(text: str, expected: tuple[str, int]) -> None:
    assert parse_server(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("192.0.2.1:0", "'192.0.2.1:0': the port must be a number from 1 to 65535"),
        ("[2001:db8::1", "'[2001:db8::1' is not HOST[:PORT]"),
        (":53", "':53' has no host"),
    ],
)
def test_parse_server_rejects_malformed_text(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^" + message.replace("[", r"\[").replace("(", r"\(") + "$"):
        parse_server(text)


def test_delegation_server_is_parsed_the_same_way_and_resolved_to_an_address() -> None:
    assert resolve_server("[::1]:5300") == ("::1", 5300)
    assert resolve_server("localhost:5300")[1] == 5300
    with pytest.raises(DelegationError, match=r"^--server '127\.0\.0\.1:0': the port must be"):
        resolve_server("127.0.0.1:0")
