"""`tcp` checks: healthy when a connection opens; with `send`, that text is written first; with
`expect`, the reply (read until the text appears, the server closes, or 64 KiB) must contain it."""

from __future__ import annotations

import asyncio

from gslbd.health.probes.base import MAX_READ, BaseProbe, ProbeFailed, abort, probe_host, quote
from gslbd.model.check import Check
from gslbd.model.service import Endpoint


async def read_until_found(reader: asyncio.StreamReader, wanted: bytes) -> bool:
    """Read until `wanted` appears (True) or the peer closes / MAX_READ bytes arrived (False)."""
    seen = bytearray()
    while len(seen) < MAX_READ:
        chunk = await reader.read(MAX_READ - len(seen))
        if not chunk:
            return False
        seen += chunk
        if wanted in seen:
            return True
    return False


class TcpProbe(BaseProbe):
    async def attempt(self, endpoint: Endpoint, check: Check) -> tuple[bool, str]:
        port = check.effective_port()
        if port is None:
            raise ProbeFailed("no port to connect to")
        reader, writer = await asyncio.open_connection(probe_host(endpoint), port, limit=MAX_READ)
        try:
            if check.send:
                writer.write(check.send.encode())
            if check.expect is None:
                return True, "connected"
            if await read_until_found(reader, check.expect.encode()):
                return True, f"reply contains {quote(check.expect)}"
            return False, f"reply does not contain {quote(check.expect)}"
        finally:
            abort(writer)
