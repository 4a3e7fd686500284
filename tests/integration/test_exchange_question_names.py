"""Questions for this site's exchange zone whose name ends in a compression pointer (issue 19: the fuzzer's
`c0 06`, a pointer to ANCOUNT's zero byte, which dnspython reads as the root): a real gslbd answers them
with a reply whose question is written again, never copied from the query, so that the reply parses."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import dns.edns
import dns.message
import dns.rcode
import dns.rdatatype
import pytest
from dns_config import CONFIG, ZONE
from gslbd_harness import Running, running_gslbd

pytestmark = pytest.mark.slow

APEX = f"_gslbd-exchange-eu.{ZONE}"
PEERS = """
peers:
  interval: 60s
  stale_after: 300s
  timeout: 1s
  notify: false
  sites:
    - {name: us, nameservers: ["127.0.0.9:9"]}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    workdir: Path = tmp_path_factory.mktemp("exchange-names")
    with running_gslbd(workdir, CONFIG + PEERS, zone=ZONE) as running:
        yield running


def pointer_query(qid: int, rtype: int, padding: int | None) -> bytes:
    """A query for the exchange apex whose root label is the pointer c0 06; with `padding`, an OPT record
    with an EDNS padding option of that many bytes (what made the raw copy of the question run long)."""
    labels = APEX.rstrip(".").split(".")
    name = b"".join(bytes((len(label),)) + label.encode() for label in labels) + b"\xc0\x06"
    opt = b""
    if padding is not None:
        option = struct.pack("!HH", 12, padding) + bytes(padding)
        opt = b"\x00" + struct.pack("!HHIH", 41, 1232, 0, len(option)) + option
    header = struct.pack("!HHHHHH", qid, 0, 1, 0, 0, 1 if opt else 0)
    return header + name + struct.pack("!HH", rtype, 1) + opt


@pytest.mark.parametrize("padding", [None, 0, 200, 388])
@pytest.mark.parametrize("rtype", ["SOA", "TXT"])
def test_a_question_ending_in_a_pointer_gets_a_reply_that_parses(
    server: Running, rtype: str, padding: int | None
) -> None:
    query = pointer_query(0x4242, dns.rdatatype.from_text(rtype), padding)
    parsed = dns.message.from_wire(query)  # dnspython reads the question: the apex, root by pointer
    assert parsed.question[0].name.to_text() == APEX
    data = server.send_raw_udp(query, timeout=3.0)
    assert data is not None, server.log()
    reply = dns.message.from_wire(data)
    assert reply.id == 0x4242 and reply.rcode() == dns.rcode.NOERROR
    assert [q.name.to_text() for q in reply.question] == [APEX]
    assert reply.question[0].rdtype == dns.rdatatype.from_text(rtype)
    soa = reply.answer if rtype == "SOA" else reply.authority
    assert soa and soa[0].rdtype == dns.rdatatype.SOA and soa[0].name.to_text() == APEX
    assert "Traceback" not in server.log() and "IndexError" not in server.log()


def test_a_transfer_question_ending_in_a_pointer_is_refused_in_a_reply_that_parses(server: Running) -> None:
    data = server.send_raw_udp(pointer_query(7, dns.rdatatype.AXFR, 200), timeout=3.0)
    assert data is not None
    reply = dns.message.from_wire(data)
    assert reply.rcode() == dns.rcode.REFUSED
    assert [q.name.to_text() for q in reply.question] == [APEX]
    assert server.alive()
