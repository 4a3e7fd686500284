"""Header bits every path writes alike: CD copied from the query (RFC 4035 3.1.6, genreport `docd`), and
AA never on SERVFAIL (`all_down: servfail`; BIND takes a SERVFAIL with AA for a lame server) nor REFUSED.

Each question is answered by the C table and the dnspython slow path, which must write the same bytes."""

from __future__ import annotations

import random
from pathlib import Path

import dns.flags
import dns.message
import dns.rcode
import pytest
from test_wire_dnssec import World, signed_config
from wire_support import ORIGIN, make_view, query

from gslbd.answer import View
from gslbd.wire import Responder, compile_table, ctable, slow_response
from gslbd.wire.compile import AnswerTable

SRC = 0xCB007105
QUESTIONS = [
    ("solo", "A", dns.rcode.NOERROR),
    ("info", "TXT", dns.rcode.NOERROR),
    ("solo", "MX", dns.rcode.NOERROR),  # NODATA
    ("nothing", "A", dns.rcode.NXDOMAIN),
    ("sf", "A", dns.rcode.SERVFAIL),  # all_down: servfail
    ("nx", "A", dns.rcode.NXDOMAIN),  # all_down: nxdomain
    ("www.example.net.", "A", dns.rcode.REFUSED),  # not ours
]


def name_of(label: str) -> str:
    return label if label.endswith(".") else f"{label}.{ORIGIN}"


def every_path(view: View, table: AnswerTable, wire: bytes) -> list[bytes]:
    """The response of the slow path and (when compiled) the C table."""
    slow = slow_response(
        wire,
        view,
        SRC,
        False,
        tcp=False,
        max_udp_payload=1232,
        use_client_subnet=True,
        rng=random.Random(3),
        seq=0,
        signer=table.signer,
        signed_zones=table.signed_zones,
    )
    out = [slow]
    if ctable.AVAILABLE:
        out.append(ctable.build_ctable(table).native.answer(wire, SRC, False, False, 0, 0.0))
    assert all(r is not None for r in out), "every path answers these questions itself"
    return [r for r in out if r is not None]


def same_on_every_path(view: View, table: AnswerTable, wire: bytes) -> dns.message.Message:
    slow, *fast = every_path(view, table, wire)
    assert all(r == slow for r in fast), "C writes the slow path's bytes"
    return dns.message.from_wire(slow)


@pytest.fixture(scope="module")
def plain() -> tuple[View, AnswerTable]:
    view = make_view()
    return view, compile_table(view, max_udp_payload=1232, use_client_subnet=True)


@pytest.mark.parametrize(("label", "rtype", "rcode"), QUESTIONS)
@pytest.mark.parametrize("edns", [None, 0])
@pytest.mark.parametrize("cd", [False, True])
def test_cd_is_copied_and_servfail_has_no_aa_on_every_path(
    plain: tuple[View, AnswerTable], label: str, rtype: str, rcode: int, edns: int | None, cd: bool
) -> None:
    msg = same_on_every_path(*plain, query(name_of(label), rtype, edns=edns, cd=cd))
    assert msg.rcode() == rcode
    assert bool(msg.flags & dns.flags.CD) == cd
    assert bool(msg.flags & dns.flags.AA) == (rcode not in (dns.rcode.SERVFAIL, dns.rcode.REFUSED))


@pytest.mark.parametrize("cd", [False, True])
def test_a_truncated_answer_copies_cd_on_every_path(plain: tuple[View, AnswerTable], cd: bool) -> None:
    msg = same_on_every_path(*plain, query(name_of("big"), "A", cd=cd))
    assert msg.flags & dns.flags.TC
    assert bool(msg.flags & dns.flags.CD) == cd


@pytest.mark.parametrize("label", ["solo", "sf", "info"])
def test_signed_answers_copy_cd_and_signed_servfail_has_no_aa(tmp_path: Path, label: str) -> None:
    world = World(signed_config(tmp_path, 13, False))
    wire = query(name_of(label), "TXT" if label == "info" else "A", dnssec_ok=True, cd=True)
    slow = slow_response(
        wire,
        world.view,
        SRC,
        False,
        tcp=False,
        max_udp_payload=1232,
        use_client_subnet=True,
        rng=random.Random(3),
        seq=0,
        signer=world.table.signer,
        signed_zones=world.table.signed_zones,
    )
    assert slow is not None
    fast = Responder(world.table, world.view, random.Random(3)).handle(wire, SRC, False)
    assert fast == slow
    msg = dns.message.from_wire(slow)
    assert msg.flags & dns.flags.CD
    assert bool(msg.flags & dns.flags.AA) == (msg.rcode() != dns.rcode.SERVFAIL)
