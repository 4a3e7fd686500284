"""GET /api/v1/events: Server-Sent Events that tell the console what changed.

    event: hello     once, at connection: {"seq": N} (the change log's newest sequence number)
    event: change    {"seq": N, "missed": bool, "all": bool, "services": [...], "changes": [...]}
                     after one or more changes (bursts within COALESCE seconds are sent as one):
                     `services` names the services whose status may have changed; `all` is true when
                     any service may have (a reload, a peer change, more than MAX_NAMES services, or
                     changes missed); `changes` are the newest change-log entries (at most MAX_CHANGES)
    : keepalive      a comment every KEEPALIVE seconds, so proxies and the browser keep the stream

Each event carries `id: N`; a browser that reconnects sends Last-Event-ID and gets what it missed (or
`missed: true` when the ring forgot it). At most `max_clients` streams are open at once: more get 503
with Retry-After, so a tab left open by every operator cannot exhaust the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from aiohttp import web

from gslbd.api.changes import Change, ChangeLog
from gslbd.api.console import change_json

DEFAULT_MAX_CLIENTS = 32
COALESCE = 0.05  # seconds: changes within this time after the first go out as one event
KEEPALIVE = 15.0  # seconds between comments on an idle stream
MAX_NAMES = 200  # more changed services than this: "all"
MAX_CHANGES = 50  # change-log entries per event at most
RETRY_MS = 2000  # what the browser waits before reconnecting


def change_event(seq: int, changes: list[Change], missed: bool) -> dict[str, Any]:
    """The data of one `change` event."""
    names = sorted({c.service for c in changes if c.service is not None})
    everything = missed or any(c.touches_all for c in changes) or len(names) > MAX_NAMES
    return {
        "seq": seq,
        "missed": missed,
        "all": everything,
        "services": [] if everything else names,
        "changes": [change_json(c) for c in changes[-MAX_CHANGES:]],
    }


def _frame(event: str | None, data: dict[str, Any] | None, event_id: int | None = None) -> bytes:
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if event is not None:
        lines.append(f"event: {event}")
    if data is not None:
        lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


class EventStreams:
    """The open event streams of one ApiServer, bounded by `max_clients`."""

    def __init__(self, log: ChangeLog, max_clients: int = DEFAULT_MAX_CLIENTS) -> None:
        self._log = log
        self.max_clients = max_clients
        self._wakes: set[asyncio.Event] = set()
        self._closing = asyncio.Event()
        self._unsubscribe = log.subscribe(self._on_change)

    @property
    def open(self) -> int:
        return len(self._wakes)

    def _on_change(self, change: Change) -> None:
        for wake in self._wakes:
            wake.set()

    def close(self) -> None:
        """End every stream (the server is stopping) and stop listening to the log."""
        self._closing.set()
        for wake in self._wakes:
            wake.set()
        self._unsubscribe()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self._closing.is_set():
            return web.json_response({"error": "the API is stopping"}, status=503)
        if len(self._wakes) >= self.max_clients:
            return web.json_response(
                {"error": f"too many event streams open (at most {self.max_clients}); retry later"},
                status=503,
                headers={"Retry-After": "5"},
            )
        wake = asyncio.Event()
        self._wakes.add(wake)
        try:
            return await self._stream(request, wake)
        finally:
            self._wakes.discard(wake)

    async def _stream(self, request: web.Request, wake: asyncio.Event) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
            }
        )
        await response.prepare(request)
        seen = self._log.last_seq
        resume = request.headers.get("Last-Event-ID", "").strip()
        if resume.isdigit() and int(resume) <= seen:
            seen = int(resume)
        with contextlib.suppress(ConnectionResetError):  # the browser went away
            await response.write(f"retry: {RETRY_MS}\n".encode())
            await response.write(_frame("hello", {"seq": self._log.last_seq}, seen))
            while not self._closing.is_set():
                if seen >= self._log.last_seq:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(KEEPALIVE):
                            await wake.wait()
                    wake.clear()
                    if self._closing.is_set():
                        break
                    if seen >= self._log.last_seq:
                        await response.write(b": keepalive\n\n")
                        continue
                    await asyncio.sleep(COALESCE)  # let a burst of verdicts go out as one event
                    wake.clear()
                changes, missed = self._log.since(seen, limit=MAX_NAMES + 1)
                seen = self._log.last_seq
                data = change_event(seen, list(changes), missed)
                await response.write(_frame("change", data, seen))
        return response
