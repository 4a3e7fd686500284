"""The queries of a dnstap capture file, for replaying them (`gslbd whatif`).

    read_queries(path) -> [TapQuery]   every AUTH_QUERY (and CLIENT_QUERY) message with its query

The file is what a dnstap reader writes (`dnstap -u SOCKET -w FILE`): Frame Streams (fstrm.py) around
Dnstap protobuf messages, decoded with the field decoder of message.py, the schema gslbd writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gslbd.server.dnstap.fstrm import FrameStreamError, file_frames
from gslbd.server.dnstap.message import AUTH_QUERY, decode_fields

CLIENT_QUERY = 5  # a resolver's captured client queries replay as well
_QUERIES = (AUTH_QUERY, CLIENT_QUERY)
_TCP = 2  # SocketProtocol TCP
_INET6 = 2  # SocketFamily INET6


class CaptureError(ValueError):
    """The file is not a dnstap capture; the text names the file and, where it can, the frame."""


@dataclass(frozen=True, slots=True)
class TapQuery:
    """One query received: its message (wire format), the client's address as an int, its family and
    transport."""

    message: bytes
    ip: int
    v6: bool
    tcp: bool


def _one(fields: dict[int, list[int | bytes]], number: int) -> int | bytes | None:
    values = fields.get(number)
    return values[-1] if values else None


def read_queries(path: str | Path) -> list[TapQuery]:
    """The queries of the capture at `path`, in the order they were logged. Messages of other types
    (responses) and queries without a message or an address are skipped. CaptureError otherwise."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CaptureError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        frames = file_frames(data)
    except FrameStreamError as exc:
        raise CaptureError(f"{path}: {exc}") from None
    out: list[TapQuery] = []
    for index, frame in enumerate(frames, 1):
        try:
            outer = decode_fields(frame)
            body = _one(outer, 14)
            message = decode_fields(body) if isinstance(body, bytes) else {}
        except ValueError as exc:
            raise CaptureError(f"{path}: frame {index}: not a dnstap message: {exc}") from None
        query, address = _one(message, 10), _one(message, 4)
        if _one(message, 1) not in _QUERIES or not isinstance(query, bytes):
            continue
        if not isinstance(address, bytes) or len(address) not in (4, 16):
            continue
        out.append(
            TapQuery(
                query,
                int.from_bytes(address, "big"),
                v6=len(address) == 16 or _one(message, 2) == _INET6,
                tcp=_one(message, 3) == _TCP,
            )
        )
    return out
