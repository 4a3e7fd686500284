"""What every probe shares: the Probe contract, where a probe connects, and the timeout and error
handling that turns every failure into a short `ProbeResult` detail instead of an exception."""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import time
from abc import ABC, abstractmethod
from typing import Protocol

from gslbd.model.check import Check
from gslbd.model.service import Endpoint
from gslbd.state.status import ProbeResult
from gslbd.types import EndpointKind

MAX_READ = 64 * 1024  # bytes a probe reads from a reply at most


class Probe(Protocol):
    """One check type. `run` never raises (cancellation aside): failures are ok=False results."""

    async def run(self, endpoint: Endpoint, check: Check) -> ProbeResult: ...


class ProbeFailed(Exception):
    """Raised inside a probe to end it with a failure whose detail is the message."""


def probe_host(endpoint: Endpoint) -> str:
    """Where the probe connects: `probe_address`, else the answered address (a hostname loses its dot)."""
    host = endpoint.probe_address if endpoint.probe_address is not None else endpoint.address
    return host.rstrip(".") if not _is_ip(host) else host


def answered_host(endpoint: Endpoint) -> str:
    """The answered address as a Host header / SNI / display value (hostnames without the dot)."""
    if endpoint.kind is EndpointKind.HOSTNAME:
        return endpoint.address.rstrip(".")
    return endpoint.address


def _is_ip(text: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, text)
        except OSError:
            continue
        return True
    return False


def seconds(value: float) -> str:
    """2.0 -> "2s", 0.25 -> "0.25s"."""
    return f"{value:g}s"


def describe_error(exc: BaseException) -> str:
    """A short text for a connection-level error."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not accepted: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve: {exc.strerror}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, OSError) and exc.errno is not None:
        text = exc.strerror or errno.errorcode.get(exc.errno, str(exc.errno))
        return text[0].lower() + text[1:] if text else str(exc)
    if isinstance(exc, asyncio.IncompleteReadError):
        return "connection closed early"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class BaseProbe(ABC):
    """Applies the check's timeout and converts errors; subclasses implement `attempt`."""

    async def run(self, endpoint: Endpoint, check: Check) -> ProbeResult:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(check.timeout):
                ok, detail = await self.attempt(endpoint, check)
        except TimeoutError:
            ok, detail = False, f"timeout after {seconds(check.timeout)}"
        except ProbeFailed as exc:
            ok, detail = False, str(exc)
        except Exception as exc:  # every other error is a failed probe, never a crashed loop
            ok, detail = False, describe_error(exc)
        return ProbeResult(ok=ok, detail=detail, duration=time.perf_counter() - started)

    @abstractmethod
    async def attempt(self, endpoint: Endpoint, check: Check) -> tuple[bool, str]:
        """(healthy, detail); may raise: errors become failures."""


def abort(writer: asyncio.StreamWriter) -> None:
    """Drop a probe connection at once (an RST: no TIME_WAIT left behind at 1,000 probes a second)."""
    try:
        writer.transport.abort()
    except Exception:  # closing is best effort
        return


def quote(text: str, limit: int = 60) -> str:
    """A repr of text cut to `limit` characters, for details."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
