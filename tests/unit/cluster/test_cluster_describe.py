"""The reasons the one warning per Redis outage gives: short, and the socket error when there is one."""

from __future__ import annotations

import pytest
from redis.exceptions import AuthenticationError, ConnectionError, TimeoutError

from gslbd.cluster.link import describe


def _chained() -> ConnectionError:
    exc = ConnectionError("Connection lost")
    exc.__context__ = ConnectionResetError(104, "Connection reset by peer")
    return exc


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (_chained(), "connection reset by peer"),
        (
            ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connect call failed."),
            "connection refused",
        ),
        (ConnectionError("Error 113 connecting to 10.0.0.5:6379. No route to host."), "no route to host"),
        (TimeoutError("Timeout reading from socket"), "timed out"),
        (ConnectionError("Connection closed by server."), "ConnectionError: Connection closed by server"),
        (
            AuthenticationError("invalid username-password pair"),
            "AuthenticationError: invalid username-password pair",
        ),
        (ConnectionError(), "ConnectionError"),
    ],
)
def test_describe_names_the_underlying_reason(exc: BaseException, reason: str) -> None:
    assert describe(exc) == reason
