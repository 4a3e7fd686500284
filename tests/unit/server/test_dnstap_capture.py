"""The dnstap file gslbd writes (fstrm.FileWriter) and reads back for `gslbd whatif` (capture.py)."""

from __future__ import annotations

from pathlib import Path

import dns.message
import pytest

from gslbd.server.dnstap.capture import CaptureError, TapQuery, read_queries
from gslbd.server.dnstap.fstrm import FileWriter, control_frame, data_frame, file_frames
from gslbd.server.dnstap.message import AUTH_QUERY, AUTH_RESPONSE, Encoder, decode_fields

QUERY = dns.message.make_query("app.example.com.", "A").to_wire()
V6 = 0x20010DB8 << 96 | 1


def write(path: Path, *payloads: bytes) -> None:
    writer = FileWriter(str(path))
    writer.sendall(b"".join(data_frame(p) for p in payloads))
    writer.close()


def test_queries_are_read_back_with_address_family_and_transport_responses_skipped(tmp_path: Path) -> None:
    enc = Encoder("eu", "gslbd test")
    path = tmp_path / "q.dnstap"
    write(
        path,
        enc.message(AUTH_QUERY, 0x7F000001, False, False, 10**18, QUERY),
        enc.message(AUTH_RESPONSE, 0x7F000001, False, False, 10**18, None, 10**18, b"answer"),
        enc.message(AUTH_QUERY, V6, True, True, 10**18, QUERY),
    )
    write(path, enc.message(AUTH_QUERY, 0x0A010203, False, False, 10**18, QUERY))  # a second run appends
    assert read_queries(path) == [
        TapQuery(QUERY, 0x7F000001, v6=False, tcp=False),
        TapQuery(QUERY, V6, v6=True, tcp=True),
        TapQuery(QUERY, 0x0A010203, v6=False, tcp=False),
    ]


def test_a_file_cut_inside_its_last_frame_is_read_up_to_it(tmp_path: Path) -> None:
    data = control_frame(2) + data_frame(b"\x08\x01") + data_frame(b"\x08\x02" * 10)[:-3]
    assert file_frames(data) == [b"\x08\x01"]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            b"root:x:0:0:root:/root:/bin/bash\n",
            "not a Frame Streams file: it does not begin with a control frame (START)",
        ),
        (b"\0\0", "not a Frame Streams file: shorter than its START frame"),
        (control_frame(2, b"protobuf:other") + data_frame(b""), "the file holds protobuf:other, not dnstap"),
        (
            control_frame(2) + data_frame(b"\x0a\x05ab"),
            "frame 1: not a dnstap message: field 1 of 5 bytes runs past the end at byte 2",
        ),
        (
            control_frame(2) + control_frame(3, None) + data_frame(b"x"),
            "data frame at byte 54 outside START ... STOP",
        ),
    ],
)
def test_what_is_not_a_dnstap_capture_is_refused_with_the_file_named(
    tmp_path: Path, data: bytes, error: str
) -> None:
    path = tmp_path / "bad"
    path.write_bytes(data)
    with pytest.raises(CaptureError) as caught:
        read_queries(path)
    assert str(caught.value) == f"{path}: {error}"


def test_a_missing_file_is_refused_with_its_name(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match=r"/nothing: cannot read: No such file or directory$"):
        read_queries(tmp_path / "nothing")


def test_the_field_decoder_refuses_truncated_varints_and_unknown_wire_types() -> None:
    assert decode_fields(b"\x08\x96\x01\x15\x01\x00\x00\x00") == {1: [150], 2: [1]}
    with pytest.raises(ValueError, match="truncated or overlong varint at byte 2"):
        decode_fields(b"\x08\x96")
    with pytest.raises(ValueError, match="wire type 3 of field 1 is not supported"):
        decode_fields(b"\x0b")
