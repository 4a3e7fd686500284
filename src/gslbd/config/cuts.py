"""Zone cuts and DNAMEs in static records: what may lie at and below them.

A static NS set below a zone's apex is a zone cut (answer/build.py answers a referral at and below it);
a static DNAME redirects every name below its owner (RFC 6672, answer/dname.py). Names there are not
the zone's data, so a record or service written there would never be answered:

- at a cut: NS, DS, and A/AAAA when the cut is one of its own nameservers (glue);
- below a cut: A/AAAA of the cut's nameservers only (glue); every nameserver below its cut needs one;
  none of the zone's own nameservers (`nameservers`) may be there;
- below a DNAME: nothing; a DNAME RRset has one record, and none is at the apex (the names gslbd keeps
  in every zone, heartbeats and the exchange's, would be below it);
- no service at or below a cut or below a DNAME.

A static NS at the origin of another served zone is no cut: that zone answers its own names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gslbd.config.fields import Report, join
from gslbd.config.names import in_zone
from gslbd.config.zones import ZoneInfo
from gslbd.model.service import Service

GLUE_TYPES = ("A", "AAAA")
AT_CUT_TYPES = ("NS", "DS")


@dataclass(frozen=True, slots=True)
class Redirects:
    """The cuts of one zone (with their nameserver names) and its DNAME owners."""

    cuts: dict[str, frozenset[str]]
    dnames: frozenset[str]

    def cut_of(self, name: str) -> str | None:
        """The outermost cut at or above `name`."""
        found = None
        for cut in self.cuts:
            if in_zone(name, cut) and (found is None or len(cut) < len(found)):
                found = cut
        return found

    def dname_above(self, name: str) -> str | None:
        """A DNAME owner strictly above `name`."""
        return next((d for d in self.dnames if name != d and in_zone(name, d)), None)


def redirects(info: ZoneInfo, served: Iterable[str]) -> Redirects:
    origins = frozenset(served)
    cuts: dict[str, set[str]] = {}
    for rec in info.zone.records:
        if rec.rtype == "NS" and rec.name != info.zone.origin and rec.name not in origins:
            cuts.setdefault(rec.name, set()).add(rec.value.lower())
    # A DNAME at the apex is an error of its own (`_misplaced`), not a reason to report every name.
    dnames = frozenset(r.name for r in info.zone.records if r.rtype == "DNAME" and r.name != info.zone.origin)
    return Redirects({cut: frozenset(targets) for cut, targets in cuts.items()}, dnames)


def _misplaced(name: str, rtype: str, origin: str, found: Redirects) -> str | None:
    """Why a static record of `rtype` at `name` cannot be there, or None."""
    dname = found.dname_above(name)
    if dname is not None:
        return (
            f"{name!r} is below the DNAME at {dname!r}, which redirects every name below it "
            "(RFC 6672): this record would never be answered"
        )
    if rtype == "DNAME" and name == origin:
        return (
            "a DNAME at the apex would redirect the names gslbd keeps in every zone (heartbeats, the "
            "exchange's); put it below the apex"
        )
    cut = found.cut_of(name)
    if cut is None:
        return None
    glue = rtype in GLUE_TYPES and name in found.cuts[cut]
    if name == cut:
        if rtype in AT_CUT_TYPES or glue:
            return None
        return (
            f"{name!r} is a zone cut (its NS records delegate it): only NS, DS and the glue of its "
            f"nameservers can be there; the {rtype} record belongs in the child zone"
        )
    if glue:
        return None
    return (
        f"{name!r} is below the zone cut {cut!r}: only glue (A/AAAA of the cut's nameservers) can be "
        f"there; the {rtype} record belongs in the child zone"
    )


def check_cuts(rep: Report, zones: list[ZoneInfo]) -> dict[str, Redirects]:
    """Report every static record misplaced at or below a cut or below a DNAME, every nameserver
    below its cut without glue, and every DNAME RRset of more than one record; the zones' cuts and
    DNAMEs by origin (zones without either are left out)."""
    served = [info.zone.origin for info in zones]
    out: dict[str, Redirects] = {}
    for info in zones:
        found = redirects(info, served)
        apex_dname = any(r.rtype == "DNAME" for r in info.owners.get(info.zone.origin, ()))
        if not found.cuts and not found.dnames and not apex_dname:
            continue
        out[info.zone.origin] = found
        for name, places in info.owners.items():
            dnames = 0
            for place in places:
                dnames += place.rtype == "DNAME"
                why = _misplaced(name, place.rtype, info.zone.origin, found)
                if why is None and place.rtype == "DNAME" and dnames > 1:
                    why = f"{name!r} has more than one DNAME (RFC 6672: a DNAME RRset holds one record)"
                if why is not None:
                    rep.error(place.line, place.path, why)
        for ns in info.zone.nameservers:
            cut = found.cut_of(ns.name)
            if cut is not None:
                rep.error(
                    info.line,
                    join(info.path, "nameservers"),
                    f"the zone's nameserver {ns.name!r} is below the zone cut {cut!r}: its address belongs "
                    "to the child zone",
                )
        for cut, targets in found.cuts.items():
            for target in sorted(targets):
                has_glue = any(p.rtype in GLUE_TYPES for p in info.owners.get(target, ()))
                if in_zone(target, cut) and not has_glue:
                    place = next(p for p in info.owners[cut] if p.rtype == "NS")
                    rep.error(
                        place.line,
                        place.record,
                        f"the nameserver {target!r} is below the zone cut {cut!r}, so it needs an A or "
                        "AAAA record (glue)",
                    )
    return out


def service_problem(service: Service, found: dict[str, Redirects]) -> str | None:
    """Why a service cannot be where it is (below a cut or a DNAME of its zone), or None."""
    zone = found.get(service.zone)
    if zone is None:
        return None
    dname = zone.dname_above(service.name)
    if dname is not None:
        return f"{service.name!r} is below the DNAME at {dname!r}, which redirects every name below it"
    cut = zone.cut_of(service.name)
    if cut is not None:
        return f"{service.name!r} is at or below the zone cut {cut!r}: the child zone's servers answer it"
    return None
