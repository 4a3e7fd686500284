"""Answers for names that do not exist below a zone cut or a DNAME (the view's names end there).

- Below a zone cut (a static NS set below the apex, answer/build.py marks the cut, its glue names and
  the empty non-terminals between with the cut's `Referral`): the referral, as at the cut itself.
- Below a DNAME (RFC 6672 2.2, 3.2): the DNAME, the CNAME it synthesizes for the question's name
  (the owner's suffix replaced by the DNAME's target, TTL the DNAME's), and that CNAME followed in our
  zones as any CNAME is (answer/chain.py: records, a policy's pick, NODATA, NXDOMAIN, a further CNAME
  or DNAME); a new name longer than 255 octets gets YXDOMAIN with the DNAME alone.

No static record and no service may lie below a DNAME or (but glue) below a cut: config/cuts.py
refuses them, so the closest encloser of such a name is the DNAME owner or a name of the cut.
"""

from __future__ import annotations

import random
from dataclasses import replace

from gslbd.answer.chain import dname_record, follow, synthesized_cname
from gslbd.answer.view import Answer, NameData, Records, View, referral_answer, render
from gslbd.types import Rcode


def beneath(
    view: View, encloser: NameData, qname: str, rtype: str, ip: int, v6: bool, rng: random.Random, seq: int
) -> Answer:
    """The answer for the nonexistent `qname` whose closest encloser `encloser` is (at or below) a
    zone cut or holds a DNAME."""
    if encloser.referral is not None:
        return referral_answer(encloser.referral)
    dname = dname_record(encloser)
    assert dname is not None, "beneath() is asked for names below a cut or a DNAME only"
    cname = synthesized_cname(qname, dname)
    if cname is None:
        return Answer(Rcode.YXDOMAIN, answer=(dname,))
    node = NameData(qname, encloser.zone, {"CNAME": Records((cname,))})
    outcome, _ = follow(node, rtype, view.names, view.find_zone)
    answer = render(node, outcome, ip, v6, rng, seq)
    return replace(answer, answer=(dname, *answer.answer))
