"""Frame Streams, the transport of dnstap, as a writer over a connected stream socket.

A data frame is a 4-byte big-endian length and the payload. A control frame starts with a zero length (the
escape), then its own 4-byte length, a 4-byte type and fields; the only field is CONTENT_TYPE (1), a 4-byte
length and the content type ("protobuf:dnstap.Dnstap"). Bidirectional handshake over a socket:

    writer READY(content types) -> reader ACCEPT(content types) -> writer START(content type)
    ... data frames ...
    writer STOP -> reader FINISH
"""

from __future__ import annotations

import socket
import struct

CONTENT_TYPE = b"protobuf:dnstap.Dnstap"

ACCEPT = 0x01
START = 0x02
STOP = 0x03
READY = 0x04
FINISH = 0x05
FIELD_CONTENT_TYPE = 0x01
MAX_CONTROL_LENGTH = 512  # the largest control frame a writer has to read

_U32 = struct.Struct(">I")
_U32x2 = struct.Struct(">II")


class FrameStreamError(Exception):
    """The other end broke the Frame Streams protocol (or closed the connection during a handshake)."""


def control_frame(kind: int, content_type: bytes | None = CONTENT_TYPE) -> bytes:
    body = _U32.pack(kind)
    if content_type is not None:
        body += _U32x2.pack(FIELD_CONTENT_TYPE, len(content_type)) + content_type
    return _U32x2.pack(0, len(body)) + body


def data_frame(payload: bytes) -> bytes:
    return _U32.pack(len(payload)) + payload


def parse_control(body: bytes) -> tuple[int, list[bytes]]:
    """(type, content types) of a control frame's body (what follows its length)."""
    if len(body) < 4:
        raise FrameStreamError("control frame shorter than its type")
    (kind,) = _U32.unpack_from(body)
    types: list[bytes] = []
    pos = 4
    while pos < len(body):
        if len(body) - pos < 8:
            raise FrameStreamError("truncated control frame field")
        field, size = _U32x2.unpack_from(body, pos)
        pos += 8
        if size > len(body) - pos:
            raise FrameStreamError("control frame field longer than the frame")
        if field == FIELD_CONTENT_TYPE:
            types.append(body[pos : pos + size])
        pos += size
    return kind, types


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise FrameStreamError("connection closed by the reader")
        buf += chunk
    return bytes(buf)


def read_control(sock: socket.socket) -> tuple[int, list[bytes]]:
    """Read one control frame from `sock` (blocking)."""
    escape, length = _U32x2.unpack(_recv_exactly(sock, 8))
    if escape != 0:
        raise FrameStreamError("expected a control frame, got a data frame")
    if length > MAX_CONTROL_LENGTH:
        raise FrameStreamError(f"control frame of {length} bytes (at most {MAX_CONTROL_LENGTH})")
    return parse_control(_recv_exactly(sock, length))


def open_writer(path: str, timeout: float) -> socket.socket:
    """Connect to the reader's unix socket at `path` and do the handshake up to START; the socket, ready
    for data frames. OSError when it cannot connect, FrameStreamError when the reader refuses."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(control_frame(READY))
        kind, types = read_control(sock)
        if kind != ACCEPT:
            raise FrameStreamError(f"expected ACCEPT, got control frame type {kind}")
        if types and CONTENT_TYPE not in types:
            raise FrameStreamError(
                f"the reader accepts {b', '.join(types).decode(errors='replace')}, not dnstap"
            )
        sock.sendall(control_frame(START))
    except BaseException:
        sock.close()
        raise
    return sock


def close_writer(sock: socket.socket) -> None:
    """STOP, wait for the reader's FINISH (within the socket's timeout), close. Errors are ignored: the
    data is written already."""
    try:
        sock.sendall(control_frame(STOP, None))
        read_control(sock)
    except (OSError, FrameStreamError):
        pass
    finally:
        sock.close()


def file_frames(data: bytes) -> list[bytes]:
    """The data frames of a Frame Streams file (what `dnstap -w` writes: START with the content type,
    data frames, STOP). FrameStreamError when it is not one, is not dnstap, or is cut short; a file cut
    after its last whole data frame (no STOP: the writer was killed) is read up to there."""
    if len(data) < 8:
        raise FrameStreamError("not a Frame Streams file: shorter than its START frame")
    if data[:4] != b"\0\0\0\0":
        raise FrameStreamError("not a Frame Streams file: it does not begin with a control frame (START)")
    frames: list[bytes] = []
    pos, started = 0, False
    while pos < len(data):
        if len(data) - pos < 4:
            raise FrameStreamError(f"truncated frame length at byte {pos}")
        (length,) = _U32.unpack_from(data, pos)
        pos += 4
        if length == 0:  # a control frame
            if len(data) - pos < 4:
                raise FrameStreamError(f"truncated control frame at byte {pos}")
            (size,) = _U32.unpack_from(data, pos)
            pos += 4
            if size > MAX_CONTROL_LENGTH or size > len(data) - pos:
                raise FrameStreamError(f"control frame of {size} bytes at byte {pos} is cut or too long")
            kind, types = parse_control(data[pos : pos + size])
            pos += size
            if kind == START:
                if types and CONTENT_TYPE not in types:
                    raise FrameStreamError(
                        f"the file holds {b', '.join(types).decode(errors='replace')}, not dnstap"
                    )
                started = True
            elif kind == STOP:
                started = False
            continue
        if not started:
            raise FrameStreamError(f"data frame at byte {pos - 4} outside START ... STOP")
        if length > len(data) - pos:
            break  # the last frame was being written when the file was copied
        frames.append(data[pos : pos + length])
        pos += length
    return frames


class FileWriter:
    """A Frame Streams file written by gslbd itself (unidirectional: no handshake). Opening appends a
    START with the content type, `close` a STOP: every run (or reopening after a failed write) adds one
    START ... STOP stretch, which `file_frames` reads in turn."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "ab")  # noqa: SIM115 -- held open until close()
        try:
            self.sendall(control_frame(START))
        except BaseException:
            self._file.close()
            raise

    def sendall(self, data: bytes) -> None:
        """Write and flush: a reader of the file (and a crash) sees every batch written so far."""
        self._file.write(data)
        self._file.flush()

    def close(self) -> None:
        try:
            self.sendall(control_frame(STOP, None))
        except OSError:
            pass
        finally:
            self._file.close()
