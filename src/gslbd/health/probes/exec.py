"""`exec` checks: run `command` (an argv list, no shell); exit status 0 is healthy.

The environment is gslbd's plus GSLBD_ADDRESS (the probed address), GSLBD_PORT (the check's port, or
empty) and GSLBD_SERVICE (the service name). The program runs in its own process group, which is
killed when the timeout passes (or the probe is cancelled). The first line of its output (stdout and
stderr together) is the detail of a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from gslbd.health.probes.base import MAX_READ, BaseProbe, ProbeFailed, describe_error, probe_host, quote
from gslbd.model.check import Check
from gslbd.model.service import Endpoint


def probe_env(endpoint: Endpoint, check: Check) -> dict[str, str]:
    port = check.effective_port()
    return {
        **os.environ,
        "GSLBD_ADDRESS": probe_host(endpoint),
        "GSLBD_PORT": "" if port is None else str(port),
        "GSLBD_SERVICE": endpoint.service,
    }


def _first_line(output: bytes) -> str:
    for line in output.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()
    return ""


async def _read_capped(stream: asyncio.StreamReader) -> bytes:
    """All of the output until EOF, keeping the first MAX_READ bytes (so the program never blocks)."""
    kept = bytearray()
    while chunk := await stream.read(MAX_READ):
        if len(kept) < MAX_READ:
            kept += chunk[: MAX_READ - len(kept)]
    return bytes(kept)


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class ExecProbe(BaseProbe):
    async def attempt(self, endpoint: Endpoint, check: Check) -> tuple[bool, str]:
        if not check.command:
            raise ProbeFailed("no command to run")
        try:
            process = await asyncio.create_subprocess_exec(
                *check.command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=probe_env(endpoint, check),
                start_new_session=True,
            )
        except OSError as exc:
            raise ProbeFailed(f"cannot run {quote(check.command[0])}: {describe_error(exc)}") from None
        try:
            assert process.stdout is not None
            output = await _read_capped(process.stdout)
            code = await process.wait()
        except BaseException:
            _kill_group(process)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            # Reap it so no zombie is left; shielded so a cancellation still waits for the exit.
            await asyncio.shield(process.wait())
            raise
        if code == 0:
            return True, "exit 0"
        status = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        line = _first_line(output)
        return False, f"{status}: {quote(line, 120)}" if line else status
