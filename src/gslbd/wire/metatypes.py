"""Signed answers to questions for the DNSSEC meta-types NSEC and RRSIG (DO queries, signed zones).

A query for type NSEC or RRSIG must not get the NODATA of an ordinary type: its compact NSEC lists NSEC
and RRSIG in its own bitmap (they exist at the name: the NSEC and its signature), so the proof contradicts
itself and validating resolvers answer SERVFAIL. Knot and NSD answer these from the zone's records, and
gslbd does the same with the records it serves at the name:

  - a name that exists (a name of the view, an empty non-terminal, or a name made by a wildcard,
    RFC 4592): its NSEC is the compact one its NODATA answers carry (next name `\\000.qname`, the
    bitmap of the types it has now plus RRSIG and NSEC). Type NSEC: that NSEC and its RRSIG in the
    answer section. Type RRSIG: the RRSIGs of every RRset at the name as this client would get each
    type (RFC 4035 3.1.1; Knot answers with all the RRSIGs of the node too), and that NSEC's RRSIG;
    RRSIGs are not signed themselves.
  - a name that answers as if it did not exist (`all_down: nxdomain`, every endpoint down): the
    compact NXNAME NSEC its other answers carry (and its RRSIG), in the answer section.
  - a name that does not exist: NXDOMAIN from the zone's NSEC chain (RFC 4035 3.1.3.2), whatever the
    budget: a compact denial would put an NSEC at the name asked, the very type it denies. The chain
    links are signed already, so these answers sign nothing on the query path.

Without DO, or outside the signed zones, these questions are answered as any other type (NODATA).
Only the slow path answers them: the C table and the Python fast path hand every DO question for NSEC
or RRSIG in a signed table to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import dns.name
import dns.rrset

from gslbd.answer import Answer, NameData, Negative, negative_soa
from gslbd.types import Rcode
from gslbd.wire.denial import Denier
from gslbd.wire.dnssec import NSEC, RRSIG, SignedReply, Signer, existing_types
from gslbd.wire.render import dns_name

META_TYPES = frozenset((NSEC, RRSIG))

# The RRSIG RRsets owned by the name asked in the signed answer for one type there (a callable of the
# slow path, which resolves the type for the client).
SignaturesOf = Callable[[int], list[dns.rrset.RRset]]


def meta_reply(
    signer: Signer,
    qname: str,
    rdtype: int,
    node: NameData | None,
    answer: Answer,
    *,
    synthesized: bool,
    deniers: Mapping[bytes, Denier] | None,
    signatures_of: SignaturesOf,
) -> SignedReply | None:
    """The signed answer to a DO question for NSEC or RRSIG (`rdtype`) at `qname` (lower-case text),
    or None when the ordinary signed answer applies (not a meta-type, no signed zone, a name the chain
    cannot deny). `node` answers the name (None: it does not exist; `synthesized`: it is the wildcard
    that makes the name); `answer` is the view's answer to the question itself."""
    zone = signer.zone_of(qname)
    if rdtype not in META_TYPES or zone is None:
        return None
    if node is None or answer.rcode == Rcode.NXDOMAIN:
        soa = [rr for rr in answer.authority if rr.rtype == "SOA"]
        denier = deniers.get(zone.origin_wire) if deniers is not None else None
        if node is not None or not soa or denier is None:
            return None
        links = denier.chain_links(dns_name(qname).to_wire() or b"")
        return signer.chain_reply(soa, links, soa[0].ttl) if links is not None else None
    ttl = negative_soa(node.zone).ttl
    if _denied(node):  # its answers deny the name (all_down: nxdomain): the NSEC they carry
        nsec, nsec_sigs = signer.nxname_rrsets(zone, qname, ttl)
        return SignedReply(Rcode.NOERROR, [nsec, nsec_sigs] if rdtype == NSEC else [nsec_sigs], [], [])
    nsec = signer.nsec_rrset(qname, ttl, existing_types(node))
    found = signer.rrsig_rrset(nsec, synthesized)
    assert found is not None  # the zone is signed
    nsec_sigs = found
    if rdtype == NSEC:
        return SignedReply(Rcode.NOERROR, [nsec, nsec_sigs], [], [])
    owner = dns.name.from_text(qname)
    sigs = [
        rrset
        for rdtype_at in existing_types(node)
        for rrset in signatures_of(rdtype_at)
        if rrset.rdtype == RRSIG and rrset.name == owner
    ]
    return SignedReply(Rcode.NOERROR, [*sigs, nsec_sigs], [], [])


def _denied(node: NameData) -> bool:
    """Whether the name answers as if it did not exist now: no data, and NXDOMAIN for a type (a
    service whose endpoints are all down, with `all_down: nxdomain`)."""
    outcomes = node.outcomes.values()
    return not existing_types(node) and any(
        isinstance(o, Negative) and o.rcode == Rcode.NXDOMAIN for o in outcomes
    )
