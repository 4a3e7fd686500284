"""Answering DNS NOTIFY (RFC 1996): how a peer site tells this one that its publication changed.

The fast path leaves every opcode but QUERY to the slow path, which hands a parsed NOTIFY here when
the composition root installed a hook (`Responder.on_notify`, set when peer sites are configured). The
hook gets the zone and the sender's address and says whether it accepts the message (a configured peer
nameserver, for a zone served here). Accepted: NOERROR with AA and the question echoed. Otherwise:
REFUSED. A NOTIFY whose question is not one SOA/IN question of a served zone is refused; the hook still
sees it, with zone "" (so that it can count it). With `peers.tsig` an unsigned NOTIFY is refused the
same way (a signed one has been verified before it gets here, and its response is signed).
"""

from __future__ import annotations

from collections.abc import Callable

import dns.message
import dns.rdataclass
import dns.rdatatype

from gslbd.answer import View
from gslbd.types import Rcode
from gslbd.wire.render import EdnsReply, build_message, message_wire, response_flags

# (zone origin or "", source address as an int, source is IPv6) -> accepted
NotifyHook = Callable[[str, int, bool], bool]


def notify_response(
    query: dns.message.Message,
    view: View,
    src_ip: int,
    src_v6: bool,
    hook: NotifyHook,
    edns: EdnsReply | None,
    *,
    signature_required: bool = False,
) -> bytes:
    """The response to a parsed NOTIFY message (`signature_required`: refuse it unless it was signed)."""
    question = list(query.question)
    zone = ""
    if len(question) == 1 and (query.had_tsig or not signature_required):
        q = question[0]
        name = q.name.canonicalize().to_text()
        if q.rdclass == dns.rdataclass.IN and q.rdtype == dns.rdatatype.SOA and name in view.zones:
            zone = name
    accepted = hook(zone, src_ip, src_v6) and zone != ""
    rcode = Rcode.NOERROR if accepted else Rcode.REFUSED
    flags = response_flags(query.flags, authoritative=accepted)
    return message_wire(build_message(query.id, flags, question, rcode=rcode, edns=edns))
