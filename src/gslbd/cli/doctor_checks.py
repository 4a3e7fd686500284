"""The judgments of `gslbd doctor`: from DNS replies (or the error of asking) to a pass/fail line with a
hint. Pure: no sockets, no printing; `cli/doctor.py` asks the questions and prints the results.

A reply is a parsed `dns.message.Message`, or a string saying why there is none ("timeout", ...).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype

from gslbd.cli.delegation_records import in_zone
from gslbd.cli.server_address import DNS_PORT, Server, server_text
from gslbd.model.config import Config
from gslbd.model.zone import Zone

Reply = dns.message.Message | str


@dataclass(frozen=True, slots=True)
class Result:
    """One check: passed or not, what was found, and what to do about a failure."""

    ok: bool
    text: str
    hint: str = ""

    def lines(self) -> list[str]:
        out = [f"{'PASS' if self.ok else 'FAIL'}  {self.text}"]
        if not self.ok and self.hint:
            out.append(f"      hint: {self.hint}")
        return out


def parent_of(origin: str) -> str:
    """The zone one label up (the usual parent of a delegation)."""
    rest = origin.split(".", 1)[1] if origin != "." else ""
    return rest or "."


def local_server(config: Config) -> Server:
    """Where this instance answers: its first `dns.listen` address (a wildcard asked on loopback)."""
    if not config.dns.listen:
        return "127.0.0.1", DNS_PORT
    first = config.dns.listen[0]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(first.host, first.host)
    return host, first.port


def nameserver_ports(config: Config) -> dict[str, int]:
    """The port each known nameserver address answers on: this instance's `dns.listen` addresses and
    the peers' `nameservers`; every other address is asked on port 53."""
    out: dict[str, int] = {}
    for listen in config.dns.listen:
        out.setdefault(_normal(listen.host), listen.port)
    for site in config.peers.sites if config.peers is not None else ():
        for ns in site.nameservers:
            out.setdefault(_normal(ns.host), ns.port)
    return out


def _normal(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def delegation_lines(zone: Zone, parent: str) -> list[str]:
    """The records the parent zone needs, in zone-file form: the NS set, and the addresses of the
    nameservers inside the parent zone."""
    lines = [f"{zone.origin} NS {ns.name}" for ns in zone.nameservers]
    for ns in zone.nameservers:
        if in_zone(ns.name, parent):
            lines.extend(f"{ns.name} {_family(a)} {a}" for a in ns.addresses)
    return lines


def _family(address: str) -> str:
    return "AAAA" if ":" in address else "A"


def rcode_text(reply: dns.message.Message) -> str:
    return dns.rcode.to_text(reply.rcode())


def referral_ns(reply: dns.message.Message, origin: str) -> list[str]:
    """The NS names of `origin` in a reply: the referral's authority section, or the answer when the
    server is authoritative for the child zone too."""
    for section in (reply.authority, reply.answer):
        found = {
            rd.to_text().lower()
            for rrset in section
            if rrset.rdtype == dns.rdatatype.NS and rrset.name.to_text().lower() == origin
            for rd in rrset
        }
        if found:
            return sorted(found)
    return []


def addresses_in(reply: dns.message.Message, name: str) -> set[str]:
    """The A/AAAA addresses of `name` anywhere in a reply (answer or additional: glue)."""
    out: set[str] = set()
    for rrset in (*reply.answer, *reply.additional):
        if rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA) and rrset.name.to_text().lower() == name:
            out.update(_normal(rd.to_text()) for rd in rrset)
    return out


def judge_delegation(zone: Zone, parent: str, server: Server, reply: Reply) -> tuple[Result, list[str]]:
    """Does the parent delegate the zone to exactly the configured nameservers? Also returns the NS
    names the parent lists (empty when it does not delegate)."""
    where = f"delegation of {zone.origin} in {parent} (asked {server_text(server)})"
    add = "; ".join(delegation_lines(zone, parent))
    if isinstance(reply, str):
        hint = (
            "check that --parent-server is a nameserver of the parent zone and reachable (UDP and TCP); "
            "without it the parent's nameservers are found through this machine's resolver"
        )
        return Result(False, f"{where}: no answer ({reply})", hint), []
    rcode = reply.rcode()
    if rcode not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
        hint = f"that server does not serve {parent}: point --parent-server at a nameserver of {parent}"
        return Result(False, f"{where}: the server answered {rcode_text(reply)}", hint), []
    listed = referral_ns(reply, zone.origin)
    if not listed:
        found = "NXDOMAIN" if rcode == dns.rcode.NXDOMAIN else "no NS records"
        hint = f"add to the zone {parent} (at the registrar or the parent's DNS provider): {add}"
        return Result(False, f"{where}: {parent} does not delegate {zone.origin} ({found})", hint), []
    wanted = sorted({ns.name for ns in zone.nameservers})
    if listed == wanted:
        return Result(True, f"{where}: NS {', '.join(listed)}"), listed
    missing = [n for n in wanted if n not in listed]
    extra = [n for n in listed if n not in wanted]
    parts = [
        f"missing {', '.join(missing)}" if missing else "",
        f"not configured {', '.join(extra)}" if extra else "",
    ]
    text = f"{where}: the parent lists NS {', '.join(listed)}; {'; '.join(p for p in parts if p)}"
    hint = f"make the NS set of {zone.origin} in {parent} exactly the configured nameservers: " + ", ".join(
        wanted
    )
    if missing:
        hint += f" (add {', '.join(missing)}"
        hint += f", remove {', '.join(extra)})" if extra else ")"
    elif extra:
        hint += f" (remove {', '.join(extra)}, or add them to zones[].nameservers)"
    return Result(False, text, hint), listed


def judge_glue(zone: Zone, parent: str, listed: Iterable[str], found: Mapping[str, set[str]]) -> Result:
    """Do the parent's addresses of the nameservers inside it match the configured addresses?
    `found`: nameserver name -> the addresses the parent gave (glue, or its own records)."""
    configured = {ns.name: {_normal(a) for a in ns.addresses} for ns in zone.nameservers}
    inside = [n for n in listed if in_zone(n, parent)]
    where = f"glue of {zone.origin} in {parent}"
    if not inside:
        return Result(True, f"{where}: no nameserver inside {parent}, none needed")
    problems: list[str] = []
    fixes: list[str] = []
    for name in inside:
        have, want = found.get(name, set()), configured.get(name, set())
        if not want:
            continue  # not a configured nameserver: the NS check already says so
        if have == want:
            continue
        shown = ", ".join(sorted(have)) or "no address"
        problems.append(f"{name} has {shown} in {parent}, the config says {', '.join(sorted(want))}")
        fixes.extend(f"{name} {_family(a)} {a}" for a in sorted(want))
    if not problems:
        matched = ", ".join(
            f"{n} {' '.join(sorted(found.get(n, set())))}" for n in inside if configured.get(n)
        )
        return Result(True, f"{where}: {matched or 'nothing to compare'}")
    hint = (
        f"resolvers reach {zone.origin} through these addresses: set them in the zone {parent} to "
        + "; ".join(fixes)
        + " (and remove the wrong ones)"
    )
    return Result(False, f"{where}: {'; '.join(problems)}", hint)


def judge_ds(zone: Zone, parent: str, reply: Reply) -> Result:
    """An unsigned zone must have no DS in the parent (validating resolvers would answer SERVFAIL); a
    signed zone needs a DS that matches one of its SEP keys (docs/dnssec.md)."""
    if zone.dnssec is not None:
        return judge_signed_ds(zone, parent, reply)
    where = f"no DS record for {zone.origin} in {parent} (the zone is unsigned)"
    if isinstance(reply, str):
        return Result(
            False, f"{where}: no answer to DS ({reply})", "ask again; the parent answered NS before"
        )
    ds = [rd.to_text() for r in reply.answer if r.rdtype == dns.rdatatype.DS for rd in r]
    if ds:
        hint = (
            f"remove the DS records of {zone.origin} from {parent} (at the registrar): validating resolvers "
            "answer SERVFAIL for a signed delegation to an unsigned zone"
        )
        return Result(False, f"{zone.origin} has DS {'; '.join(ds)} in {parent}", hint)
    return Result(True, f"{where}: {rcode_text(reply)}, none")


def _ds_key(text: str) -> tuple[str, ...]:
    """A DS rdata compared without regard to case or spacing of the digest."""
    tag, alg, dtype, *digest = text.split()
    return (tag, alg, dtype, "".join(digest).lower())


def judge_signed_ds(zone: Zone, parent: str, reply: Reply) -> Result:
    """A signed zone: the parent's DS set must hold a DS of a key the zone serves (else the zone is
    bogus to validating resolvers, or insecure when there is no DS at all)."""
    assert zone.dnssec is not None
    where = f"DS of {zone.origin} in {parent} matches a served key"
    if isinstance(reply, str):
        return Result(
            False, f"{where}: no answer to DS ({reply})", "ask again; the parent answered NS before"
        )
    ours = {_ds_key(ds) for ds in zone.dnssec.cds}
    found = [rd.to_text() for r in reply.answer if r.rdtype == dns.rdatatype.DS for rd in r]
    hint = f"publish the DS printed by `gslbd delegation` in {parent} (or apply it with --apply)"
    if not found:
        return Result(False, f"{where}: there is none, so the zone is insecure", hint)
    matching = [ds for ds in found if _ds_key(ds) in ours]
    if not matching:
        why = f"{'; '.join(found)} matches none of the zone's keys: validating resolvers answer SERVFAIL"
        return Result(False, f"{where}: {why}", hint + ", and remove the stale ones")
    stale = [ds for ds in found if _ds_key(ds) not in ours]
    note = f" ({len(stale)} more for keys it does not serve)" if stale else ""
    return Result(True, f"{where}: {'; '.join(matching)}{note}")


def judge_signatures(zone: Zone, server: Server, reply: Reply, now: float) -> Result:
    """The zone's served signatures (SOA and DNSKEY asked with DO): present, made by a served key, and
    not within refresh_before of expiring (gslbd re-signs before that, so this means it does not)."""
    assert zone.dnssec is not None
    where = f"signatures of {zone.origin} at {server_text(server)}"
    if isinstance(reply, str):
        return Result(False, f"{where}: no answer ({reply})", "is gslbd running there?")
    sigs = [rd for r in reply.answer if r.rdtype == dns.rdatatype.RRSIG for rd in r]
    if not sigs:
        return Result(False, f"{where}: none (no RRSIG with the answer)", "is zones[].dnssec set there too?")
    tags = {k.tag for k in zone.dnssec.keys}
    unknown = sorted({rd.key_tag for rd in sigs} - tags)
    if unknown:
        hint = "every site of a zone must share the key files (docs/dnssec.md)"
        return Result(False, f"{where}: made by keys {unknown} that this config does not have", hint)
    soonest = min(rd.expiration for rd in sigs)
    left = soonest - now
    if left < zone.dnssec.refresh_before:
        hint = "gslbd re-signs before refresh_before; restart it or check its clock"
        return Result(False, f"{where}: one expires in {left / 3600:.1f} h", hint)
    return Result(True, f"{where}: valid for {left / 86400:.1f} more days at least")


def judge_soa(zone: Zone, ns_name: str, server: Server, reply: Reply) -> Result:
    """Does a nameserver answer the zone's SOA authoritatively?"""
    where = f"nameserver {ns_name} ({server_text(server)}) answers SOA {zone.origin} with AA"
    if isinstance(reply, str):
        hint = (
            f"is gslbd running there and listening on {server_text(server)} (dns.listen)? Open UDP and TCP "
            "in firewalls; a nameserver address without a port in the config is asked on the dns.listen port "
            "of the same address, or the peers' nameservers port, else 53"
        )
        return Result(False, f"{where}: no answer ({reply})", hint)
    soa = [
        r for r in reply.answer if r.rdtype == dns.rdatatype.SOA and r.name.to_text().lower() == zone.origin
    ]
    aa = bool(reply.flags & dns.flags.AA)
    if reply.rcode() == dns.rcode.NOERROR and soa and aa:
        serial = soa[0][0].serial
        return Result(True, f"{where}: serial {serial}")
    got = f"{rcode_text(reply)}{', AA set' if aa else ', AA clear'}{'' if soa else ', no SOA'}"
    hint = f"the server there does not serve {zone.origin}: is it gslbd with this zone under zones[]?"
    return Result(False, f"{where}: got {got}", hint)


def _answer_text(reply: dns.message.Message) -> str:
    parts: list[str] = []
    for rrset in reply.answer:
        kind = dns.rdatatype.to_text(rrset.rdtype)
        values = " ".join(rd.to_text() for rd in rrset)
        parts.append(f"{kind} {values}" if kind != "CNAME" else f"CNAME {values}")
    return " -> ".join(parts)


def judge_name(kind: str, name: str, server: Server, replies: Mapping[str, Reply], note: str = "") -> Result:
    """Does a service or locality name answer A or AAAA (a CNAME chain counts) authoritatively?"""
    where = f"{kind} {name}" + (f" ({note})" if note else "")
    errors = {t: r for t, r in replies.items() if isinstance(r, str)}
    if errors:
        rtype, error = next(iter(errors.items()))
        hint = f"gslbd at {server_text(server)} does not answer: is it running (dns.listen)?"
        return Result(False, f"{where}: no answer to {rtype} ({error})", hint)
    got: list[str] = []
    answered: list[str] = []
    for rtype, reply in replies.items():
        assert not isinstance(reply, str)
        if reply.rcode() == dns.rcode.NOERROR and reply.answer:
            answered.append(_answer_text(reply))
        else:
            got.append(f"{rtype} {rcode_text(reply)}{' (NODATA)' if reply.rcode() == 0 else ''}")
        if not reply.flags & dns.flags.AA:
            return Result(
                False, f"{where}: {rtype} answer without AA", "is this server gslbd serving the zone?"
            )
    if answered:
        return Result(True, f"{where}: {'; '.join(answered)}")
    hint = (
        "no healthy endpoint and all_down decides: see `gslbd status` and "
        f"`gslbd explain {name} --client <address>`"
    )
    return Result(False, f"{where}: {', '.join(got)}", hint)


def judge_peer(
    site: str, server: Server, zone: str, soa: Reply, heartbeat: Reply, now: float, stale_after: float
) -> Result:
    """Does a peer site's nameserver answer its zone authoritatively, with a fresh heartbeat?"""
    where = f"peer {site} at {server_text(server)}"
    if isinstance(soa, str):
        hint = f"is gslbd running at site {site}? check peers.sites[{site}].nameservers and firewalls"
        return Result(False, f"{where}: no answer to SOA {zone} ({soa})", hint)
    if soa.rcode() != dns.rcode.NOERROR or not soa.flags & dns.flags.AA or not soa.answer:
        hint = f"the server there does not serve {zone}: check peers.sites[{site}].nameservers"
        return Result(False, f"{where}: SOA {zone} got {rcode_text(soa)}", hint)
    beat = f"heartbeat-{site}.{zone}"
    seconds = _heartbeat(heartbeat)
    if seconds is None:
        found = heartbeat if isinstance(heartbeat, str) else rcode_text(heartbeat)
        hint = f"the peer does not publish {beat}: is it gslbd with site.name '{site}' and a peers block?"
        return Result(False, f"{where}: no heartbeat ({found})", hint)
    if seconds <= 0:
        hint = (
            "the peer publishes heartbeat 0 until it has evaluated health: its endpoints count as stale here"
        )
        return Result(False, f"{where}: heartbeat 0 (no health evaluation yet)", hint)
    age = now - seconds
    if age > stale_after:
        hint = (
            f"the peer has not evaluated health for {age:.0f} s (stale_after {stale_after:g} s): "
            "its endpoints do not count here; see its logs and `gslbd status` there"
        )
        return Result(False, f"{where}: heartbeat {age:.0f} s old", hint)
    return Result(True, f"{where}: serves {zone}, heartbeat {max(age, 0):.0f} s old")


def judge_peer_key(site: str, server: Server, key_name: str, signed: Reply) -> Result:
    """Did a peer answer a question signed with the exchange's key (peers.tsig) with a signed reply?"""
    where = f"peer {site} at {server_text(server)}"
    if isinstance(signed, str) or not signed.had_tsig:
        found = signed if isinstance(signed, str) else f"an unsigned {rcode_text(signed)}"
        hint = (
            f"every site needs the same peers.tsig key ({key_name}); a site with another key or none "
            "neither verifies this site's polls nor signs its answers"
        )
        return Result(False, f"{where}: a question signed with TSIG key {key_name} got {found}", hint)
    return Result(True, f"{where}: verifies and signs with TSIG key {key_name}")


def _heartbeat(reply: Reply) -> float | None:
    if isinstance(reply, str):
        return None
    for rrset in reply.answer:
        if rrset.rdtype == dns.rdatatype.TXT:
            for rd in rrset:
                text = b"".join(rd.strings).decode(errors="replace")
                try:
                    value = float(text)
                except ValueError:
                    continue
                return value
    return None
