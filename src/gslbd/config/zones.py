"""Zones: origin, TTLs, SOA (with defaults derived from the origin), nameservers and static records.

dnspython (record types and values) and the DNSSEC key reader are imported when a zone has records or
a `dnssec` section: loading them costs a tenth of a second, which `gslbd check` of a config without
them does not pay."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gslbd.config.fields import Invalid, MapReader, Report, as_map, integer, join, string, ttl
from gslbd.config.loader import Node, Scalar, Seq
from gslbd.config.names import in_zone, ip_address, make_name, name_in, origin_name, relative_warning
from gslbd.model.zone import Nameserver, Soa, StaticRecord, Zone

PLACEHOLDER_ORIGIN = "zone.invalid."  # lets the rest of a zone be checked when its origin is wrong
RESERVED_PREFIXES = ("localtargets-", "heartbeat-", "_gslbd-exchange-")
# SOA timer defaults that pass zonemaster (refresh >= 14400, retry >= 3600, expire >= 604800, minimum >= 300;
# docs/configuration.md). gslbd has no secondaries of its public zones, so refresh, retry and expire only
# inform; a resolver caches a denial for the TTL of the SOA in it, min(ttl, negative_ttl).
REFRESH = 14400
RETRY = 3600
EXPIRE = 604800
MIN_MINIMUM = 300
# Types gslbd makes itself (docs/dnssec.md): from the zone's keys, or when it signs and denies.
KEY_TYPES = ("DNSKEY", "CDS", "CDNSKEY")
SIGNER_TYPES = ("RRSIG", "NSEC", "NSEC3", "NSEC3PARAM")


@dataclass(frozen=True, slots=True)
class Place:
    """Where a static record was written: its type, the record's path, and its value's path and line."""

    rtype: str
    record: str
    path: str
    line: int


@dataclass(slots=True)
class ZoneInfo:
    """A validated zone plus where its parts came from (for later cross-checks)."""

    zone: Zone
    path: str
    line: int
    owners: dict[str, list[Place]] = field(default_factory=dict)  # owner name -> its static records


def reserved_message(name: str, origin: str) -> str | None:
    """Why `name` may not be used by a record or service (the exchange's names), else None."""
    first = name.split(".", 1)[0]
    if name != origin and any(first.startswith(p) for p in RESERVED_PREFIXES):
        return (
            "names starting with 'localtargets-', 'heartbeat-' or '_gslbd-exchange-' are reserved for the "
            f"exchange: {name!r}"
        )
    return None


def _rname(origin: str) -> Callable[[Node], str]:
    def conv(node: Node) -> str:
        text = string(node).strip()
        if "@" in text:
            local, _, domain = text.partition("@")
            if not local or "." in local:
                raise Invalid(
                    f"cannot turn {text!r} into an rname; write it as a name: hostmaster.example.com."
                )
            return make_name(local + "." + domain.rstrip(".") + ".", None)
        return make_name(text, origin)

    return conv


def _read_soa(
    r: MapReader | None, origin: str, nameservers: tuple[Nameserver, ...], negative_ttl: int
) -> Soa:
    mname = nameservers[0].name if nameservers else "ns1." + origin
    rname = "hostmaster." + origin
    # The MINIMUM field is at least 300 (zonemaster); resolvers cache a denial for the TTL of the SOA in
    # it, which is min(ttl, negative_ttl): a GSLB keeps that short (a new service answers soon).
    minimum = max(negative_ttl, MIN_MINIMUM)
    if r is None:
        return Soa(mname, rname, 1, REFRESH, RETRY, EXPIRE, minimum, automatic=True)
    if r.has("minimum"):
        r.error("minimum", "set the zone's negative_ttl instead (the SOA minimum is the negative TTL)")
    r.check_keys(("mname", "rname", "serial", "refresh", "retry", "expire", "minimum"))
    rname_conv = _rname(origin)
    return Soa(
        mname=r.get("mname", name_in(origin), mname),
        rname=r.get("rname", rname_conv, rname),
        serial=r.get("serial", integer(0, 2**32 - 1), 1),
        refresh=r.get("refresh", ttl, REFRESH),
        retry=r.get("retry", ttl, RETRY),
        expire=r.get("expire", ttl, EXPIRE),
        minimum=minimum,
        automatic=not r.has("serial"),
    )


def _warn_relative(r: MapReader, key: str, origin: str) -> None:
    node = r.node_of(key)
    if isinstance(node, Scalar) and isinstance(node.value, str):
        warning = relative_warning(node.value, origin)
        if warning is not None:
            r.warn(key, warning)


def _read_nameservers(r: MapReader, origin: str) -> tuple[Nameserver, ...]:
    out: list[Nameserver] = []
    seen: dict[str, str] = {}
    for item, path in r.items("nameservers"):
        n = as_map(r.rep, item, path)
        if n is None:
            continue
        n.check_keys(("name", "address", "addresses"))
        name = n.req("name", name_in(origin))
        _warn_relative(n, "name", origin)
        if n.has("address") and n.has("addresses"):
            n.error("addresses", "give either address or addresses, not both")
        found = n.list_of("address", ip_address, single=True) or n.list_of("addresses", ip_address) or []
        addresses = tuple(dict.fromkeys(a for a, _, _ in found))
        if name is None:
            continue
        if name in seen:
            n.error("name", f"duplicate nameserver {name!r} (also {seen[name]})")
            continue
        seen[name] = path
        if in_zone(name, origin) and not addresses and not n.has("address") and not n.has("addresses"):
            n.rep.error(
                n.line, n.at("address"), f"{name!r} is inside the zone, so it needs an address (glue)"
            )
        out.append(Nameserver(name, addresses))
    return tuple(out)


def _quote_txt(text: str) -> str:
    if text.startswith('"'):
        return text
    escaped = [c.replace("\\", "\\\\").replace('"', '\\"') for c in text]
    chunks = ["".join(escaped[i : i + 255]) for i in range(0, max(len(escaped), 1), 255)]
    return " ".join(f'"{c}"' for c in chunks)


def _record_value(node: Node) -> str:
    value = node.value if isinstance(node, Scalar) else None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise Invalid("expected the record data as a string")
    return str(value)


def _read_record(
    r: MapReader, origin: str, zone_ttl: int, info: ZoneInfo, signed: bool
) -> list[StaticRecord]:
    r.check_keys(("name", "type", "value", "ttl"))
    name = r.req("name", name_in(origin))
    _warn_relative(r, "name", origin)
    rdtype = r.req("type", _rtype)
    record_ttl = r.get("ttl", ttl, zone_ttl)
    node = r.node_of("value")
    if node is None:
        r.missing("value")
        return []
    items = list(node.items) if isinstance(node, Seq) else [node]
    paths = [join(r.at("value"), i) for i in range(len(items))] if isinstance(node, Seq) else [r.at("value")]
    if not items:
        r.error("value", "must not be empty")
    if name is None or rdtype is None:
        return []
    reserved = reserved_message(name, origin)
    misplaced = ("name", reserved) if reserved is not None else _placement(name, rdtype, origin, signed)
    if misplaced is not None:
        r.error(*misplaced)
        return []
    out = []
    for item, path in zip(items, paths, strict=True):
        try:
            text = _rdata(rdtype, _record_value(item), origin)
        except Invalid as exc:
            r.rep.error(item.line, path, exc.message)
            continue
        out.append(StaticRecord(name, rdtype, text, record_ttl))
        info.owners.setdefault(name, []).append(Place(rdtype, r.path, path, item.line))
    return out


def _rtype(node: Node) -> str:
    import dns.rdatatype

    text = string(node).strip()
    try:
        rdtype = dns.rdatatype.from_text(text)
    except dns.rdatatype.UnknownRdatatype:
        raise Invalid(f"unknown record type {text!r}") from None
    if dns.rdatatype.is_metatype(rdtype) or rdtype == dns.rdatatype.OPT:
        raise Invalid(f"{text!r} is not a type a zone can hold")
    return dns.rdatatype.to_text(rdtype)


def _computed(rtype: str, signed: bool) -> str | None:
    """Why a static record of `rtype` is refused because gslbd makes that type itself, else None.

    gslbd is the only server and signer of its zones: a static copy would replace (or contradict) the
    records it computes, and every validator would then fail the whole zone."""
    if rtype in KEY_TYPES:
        made = f"{rtype} records are made from the zone's dnssec keys"
        if signed:
            return made + "; a static set would replace the real one and break validation of the zone"
        return made + " (gslbd is the only signer of its zones); this zone is unsigned, so it has none"
    if rtype in SIGNER_TYPES:
        made = f"{rtype} records are made by gslbd when it signs answers and proves denials"
        if signed:
            return made + "; a static one would contradict them"
        return made + " (gslbd is the only signer of its zones); this zone is unsigned, so it has none"
    return None


def _placement(name: str, rtype: str, origin: str, signed: bool) -> tuple[str, str] | None:
    """(key, why) when a record of this name and type cannot be written in this zone."""
    if not in_zone(name, origin):
        return "name", f"{name!r} is not inside the zone {origin!r}"
    computed = _computed(rtype, signed)
    if computed is not None:
        return "type", computed
    if name == origin and rtype == "DS":
        return "type", (
            "a DS record belongs in the parent zone, not at the apex (`gslbd delegation` prints it)"
        )
    if rtype == "SOA":
        return "type", "SOA records are made from the zone's soa settings"
    if name == origin and rtype == "NS":
        return "type", "the apex NS records are made from the zone's nameservers"
    if name == origin and rtype == "CNAME":
        return "type", "a CNAME cannot be at the zone apex"
    return None


def _rdata(rtype: str, text: str, origin: str) -> str:
    """The RDATA in absolute presentation form; raises Invalid when it does not parse as `rtype`."""
    import dns.exception
    import dns.name
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype

    if rtype in ("TXT", "SPF"):
        text = _quote_txt(text)
    try:
        rdata = dns.rdata.from_text(
            dns.rdataclass.IN,
            dns.rdatatype.from_text(rtype),
            text,
            origin=dns.name.from_text(origin),
            relativize=False,
        )
    except (dns.exception.DNSException, ValueError, TypeError) as exc:
        raise Invalid(f"invalid {rtype} value {text!r}: {exc}") from None
    return rdata.to_text()


def _check_ds(rep: Report, name: str, types: set[str], places: list[Place]) -> None:
    """A static DS is only allowed at a delegation point: a name below the apex with a static NS set."""
    if "DS" not in types or "NS" in types:
        return
    place = next(p for p in places if p.rtype == "DS")
    message = (
        f"a DS record is only allowed at a delegation point (a name with a static NS set); "
        f"{name!r} has no NS records"
    )
    rep.error(place.line, place.path, message)


def _check_rrsets(rep: Report, info: ZoneInfo) -> None:
    by_name: dict[str, list[StaticRecord]] = {}
    for rec in info.zone.records:
        by_name.setdefault(rec.name, []).append(rec)
    for name, records in by_name.items():
        places = info.owners[name]
        types = {rec.rtype for rec in records}
        _check_ds(rep, name, types, places)
        cnames = [i for i, rec in enumerate(records) if rec.rtype == "CNAME"]
        if len(cnames) > 1:
            place = places[cnames[1]]
            rep.error(place.line, place.path, f"{name!r} has more than one CNAME")
        if cnames and len(types) > 1:
            other = next(i for i, rec in enumerate(records) if rec.rtype != "CNAME")
            first, later = sorted((cnames[0], other))
            place = places[later]
            message = f"{name!r} has a CNAME and other data ({places[first].record}); a CNAME stands alone"
            rep.error(place.line, place.path, message)
        ttls: dict[str, int] = {}
        for i, rec in enumerate(records):
            if ttls.setdefault(rec.rtype, rec.ttl) != rec.ttl:
                rep.error(
                    places[i].line, places[i].path, f"the {rec.rtype} records of {name!r} must share one TTL"
                )
                break


def read_zone(rep: Report, r: MapReader) -> ZoneInfo:
    r.check_keys(("origin", "ttl", "negative_ttl", "soa", "nameservers", "records", "dnssec"))
    origin = r.req("origin", origin_name) or PLACEHOLDER_ORIGIN
    zone_ttl = r.get("ttl", ttl, 30)
    negative_ttl = r.get("negative_ttl", ttl, 30)
    nameservers = _read_nameservers(r, origin)
    if not r.has("nameservers") and origin != PLACEHOLDER_ORIGIN:
        rep.warn(r.line, r.at("nameservers"), "no nameservers: the zone has no NS records")
    soa = _read_soa(r.sub("soa"), origin, nameservers, negative_ttl)
    info = ZoneInfo(Zone(origin, zone_ttl, negative_ttl, soa, nameservers), r.path, r.line)
    records: list[StaticRecord] = []
    signed = r.has("dnssec")
    for item, path in r.items("records"):
        rec = as_map(rep, item, path)
        if rec is not None:
            records.extend(_read_record(rec, origin, zone_ttl, info, signed))
    signing = r.sub("dnssec")
    dnssec = None
    if signing is not None:
        from gslbd.config.dnssec import read_dnssec

        dnssec = read_dnssec(signing, origin)
    info.zone = Zone(origin, zone_ttl, negative_ttl, soa, nameservers, tuple(records), dnssec)
    _check_rrsets(rep, info)
    return info


def read_zones(rep: Report, root: MapReader) -> list[ZoneInfo]:
    """Every zone under `zones:`; duplicate origins are reported (and the later one dropped)."""
    out: list[ZoneInfo] = []
    seen: dict[str, str] = {}
    for item, path in root.items("zones"):
        r = as_map(rep, item, path)
        if r is None:
            continue
        info = read_zone(rep, r)
        origin = info.zone.origin
        if origin == PLACEHOLDER_ORIGIN:
            continue
        if origin in seen:
            r.error("origin", f"duplicate zone {origin!r} (also {seen[origin]})")
            continue
        seen[origin] = path
        out.append(info)
    return out
