"""What the transports call to answer one DNS message (the wire layer's Responder fits it)."""

from __future__ import annotations

from typing import Protocol


class Handler(Protocol):
    """Answers one DNS message from a client at (src_ip, src_v6); None means drop it."""

    def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None: ...
