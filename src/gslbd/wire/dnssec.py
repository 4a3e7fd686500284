"""Online DNSSEC signing: RRSIGs for the answer table, compact denial (RFC 9824) for negative answers.

A signature belongs to an RRset, not to a query: `Signer.rrsig_rdatas` signs an RRset once (per key)
and keeps the RRSIG rdata in a cache keyed by the RRset's canonical content, so the compiler signs a
policy variant when it first appears and every later compilation (incremental updates included)
reuses the signature until it comes within `refresh_before` of its expiry. Nothing here runs per
query except `denial_records`, the NSEC of a name that does not exist (its owner is the query name,
so it can only be signed when that name is first asked; the result is cached too).

Signed responses (only for queries with the DO bit, in zones with `dnssec`):
  - positive answers: each RRset followed by its RRSIG RRset (DNSKEY, CDS and CDNSKEY signed by the
    SEP keys, everything else by the zone-signing keys; a single key signs everything);
  - NODATA: SOA, its RRSIG, an NSEC at the query name whose next name is `\\000.qname` and whose
    bitmap lists the types that exist at the name (plus RRSIG and NSEC), and its RRSIG;
  - a name that does not exist (and all_down=nxdomain): the same with the bitmap RRSIG NSEC NXNAME,
    rcode NOERROR, or NXDOMAIN when the query has the Compact Answers OK (CO) flag (RFC 9824 4).
"""

from __future__ import annotations

import random
import struct
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from gslbd.answer import Answer, NameData, Negative, Referral, Rr
from gslbd.clock import SystemClock
from gslbd.model.dnssec import Dnssec, DnssecKey
from gslbd.types import Rcode
from gslbd.wire.render import IN, dns_name, to_rrsets

try:
    from gslbd.wire import _cfast
except ImportError:  # not compiled here: the C tables are not used either
    _cfast = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from gslbd.wire.denial import Denier, Link

NS_TYPE = 2
RRSIG = 46
NSEC = 47
NXNAME = 128  # RFC 9824: the meta-type in an NSEC bitmap that says the name does not exist
CO = 0x4000  # Compact Answers OK, in the OPT record's flags (RFC 9824 4)
KEYSET_TYPES = frozenset((dns.rdatatype.DNSKEY, dns.rdatatype.CDS, dns.rdatatype.CDNSKEY))
INCEPTION_SLACK = 3600  # signatures start an hour in the past: resolvers' clocks are not ours
DENIAL_CACHE_MAX = 100_000  # NSEC records of nonexistent names kept (then the cache starts anew)
# RRSIGs of answers synthesized per query name (a wildcard's, RFC 4592, signed at the name asked): the
# least recently used go first past this many RRsets (`Signer._synth`), so that random names below a
# wildcard cannot grow the signer's memory without bound.
SYNTH_CACHE_MAX = 10_000


def type_bitmap(types: Iterable[int]) -> bytes:
    """The NSEC type bitmap (RFC 4034 4.1.2) of a set of types."""
    windows: dict[int, bytearray] = {}
    for t in sorted(set(types)):
        window = windows.setdefault(t >> 8, bytearray())
        low = t & 0xFF
        need = (low >> 3) + 1
        if len(window) < need:
            window.extend(b"\x00" * (need - len(window)))
        window[low >> 3] |= 0x80 >> (low & 7)
    return b"".join(bytes((w, len(bits))) + bytes(bits) for w, bits in sorted(windows.items()))


def name_labels(wire: bytes) -> int:
    """The RRSIG labels field for an owner name in wire form: its labels, not counting a leading `*`."""
    count = 0
    pos = 0
    while wire[pos]:
        count += 1
        pos += wire[pos] + 1
    return count - 1 if wire[:2] == b"\x01*" else count


class KeySigner:
    """One private key, ready to sign (cryptography), with its DNSKEY algorithm and key tag."""

    __slots__ = ("_sign", "algorithm", "tag")

    def __init__(self, key: DnssecKey) -> None:
        self.algorithm = key.algorithm
        self.tag = key.tag
        if key.algorithm == 13:
            ec_key = ec.derive_private_key(int.from_bytes(key.private, "big"), ec.SECP256R1())
            algorithm = ec.ECDSA(hashes.SHA256())

            def sign_ec(data: bytes) -> bytes:
                r, s = decode_dss_signature(ec_key.sign(data, algorithm))
                return r.to_bytes(32, "big") + s.to_bytes(32, "big")

            self._sign: Callable[[bytes], bytes] = sign_ec
        else:
            self._sign = ed25519.Ed25519PrivateKey.from_private_bytes(key.private).sign

    def sign(self, data: bytes) -> bytes:
        return self._sign(data)


@dataclass(frozen=True, slots=True)
class ZoneKeys:
    """A signed zone: its settings and the keys that sign its key set and everything else."""

    origin: str
    origin_wire: bytes
    dnssec: Dnssec
    keyset: tuple[KeySigner, ...]
    others: tuple[KeySigner, ...]


CacheKey = tuple[object, ...]


class DenialBudget:
    """A token bucket of fresh compact-denial signatures: `rate` per second, at most `rate` (and at
    least one) saved up. `take()` is called only when a nonexistent name has no cached denial; once the
    bucket is empty it costs one clock read until the next token is due.

    `gate` (with the C extension) tells the C tables (wire/ctable.py) the same `empty_until`: before it
    they answer a nonexistent name from the NSEC chain themselves, after it they ask Python, which
    calls `take`. C reads the system's wall clock, so a budget on another clock (a test's FakeClock)
    shows C `empty_until` only when it is infinite (rate 0) and otherwise never closes the gate."""

    __slots__ = ("_last", "_real", "_tokens", "burst", "empty_until", "gate", "rate", "wall")

    def __init__(self, rate: int, wall: Callable[[], float]) -> None:
        if getattr(wall, "__func__", None) is SystemClock.wall:
            wall = time.time  # the same clock without a Python call: take() runs on the query path
        self.rate = rate
        self.burst = float(max(rate, 1))
        self.wall = wall
        self._real = wall is time.time
        self._tokens = self.burst if rate else 0.0
        self._last = wall()
        # No token before this time (`take` is False): the query path reads it without a call.
        self.empty_until = float("inf") if rate == 0 else float("-inf")
        self.gate = _cfast.Gate(self.empty_until) if _cfast is not None else None

    def take(self) -> bool:
        """True when one signature may be made now (and count it)."""
        now = self.wall()
        if now < self.empty_until:
            return False
        tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if tokens >= 1.0:
            self._tokens = tokens - 1.0
            return True
        self._tokens = tokens
        self.empty_until = now + (1.0 - tokens) / self.rate
        if self.gate is not None and self._real:
            self.gate.set(self.empty_until)
        return False


class Signer:
    """Signs RRsets of the signed zones and caches the signatures (see the module docstring).

    One per process lineage of tables (the AnswerBuilder keeps it across configs and snapshots);
    `wall()` gives the time signatures are made at."""

    def __init__(
        self,
        zones: Mapping[str, Dnssec],
        wall: Callable[[], float],
        rng: random.Random | None = None,
        served: Iterable[str] = (),
        share: Signer | None = None,
    ) -> None:
        """`share`: a signer whose signature cache (and key objects) this one shares, so that a new
        config with the same keys signs nothing again; that signer is not otherwise changed."""
        self.wall = wall
        self.rng = rng or random.Random()
        self.zones: dict[str, ZoneKeys] = {}
        self._cache: dict[CacheKey, tuple[int, tuple[bytes, ...]]] = share._cache if share else {}
        # The same for RRsets owned by a query name that is no name of the view (synthesized from a
        # wildcard): a bounded LRU (SYNTH_CACHE_MAX), never in `_cache`.
        self._synth: OrderedDict[CacheKey, tuple[int, tuple[bytes, ...]]] = (
            share._synth if share else OrderedDict()
        )
        self._denials: dict[bytes, tuple[int, tuple[bytes, ...], bytes]] = {}
        # The records of `_denials` alone, read by the fast path without a clock (the App's re-signing
        # timer clears them when the earliest is due: see forget_due).
        self.denial_wire: dict[bytes, bytes] = {}
        # The same for the C tables (wire/ctable.py): filled and cleared with `denial_wire`.
        self.denial_native = _cfast.DenialCache() if _cfast is not None else None
        self.signatures_made = 0
        self._earliest: float = share._earliest if share else float("inf")  # the earliest refresh cached
        self._signers: dict[DnssecKey, KeySigner] = share._signers if share else {}
        self.served: frozenset[str] = frozenset()
        # Per zone: the budget of fresh compact denials (past it wire/denial.py serves the NSEC chain).
        self.budgets: dict[str, DenialBudget] = dict(share.budgets) if share else {}
        self.set_zones(zones, served)

    def set_zones(self, zones: Mapping[str, Dnssec], served: Iterable[str] = ()) -> None:
        """Sign these zones from now on (a new config); cached signatures of unchanged keys stay.
        `served`: every zone served, signed or not (a name belongs to the most specific one)."""
        self.served = frozenset((*served, *zones))
        out: dict[str, ZoneKeys] = {}
        for origin, settings in zones.items():
            old = self.zones.get(origin)
            if old is not None and old.dnssec == settings:
                out[origin] = old
                continue
            signers = {k.tag: self._key_signer(k) for k in settings.keys if k.sign}
            out[origin] = ZoneKeys(
                origin,
                dns_name(origin).to_wire() or b"",
                settings,
                tuple(signers[k.tag] for k in settings.signing_keys(True)),
                tuple(signers[k.tag] for k in settings.signing_keys(False)),
            )
        if out.keys() != self.zones.keys() or any(out[o] is not self.zones[o] for o in out):
            self._forget_denials()
        self.budgets = {
            o: self.budgets[o]
            if o in self.budgets and self.budgets[o].rate == z.dnssec.denial_signing_rate
            else DenialBudget(z.dnssec.denial_signing_rate, self.wall)
            for o, z in out.items()
        }
        self.zones = out

    def _key_signer(self, key: DnssecKey) -> KeySigner:
        """One KeySigner per key pair for the signer's life: cached signatures are keyed by them."""
        found = self._signers.get(key)
        if found is None:
            found = self._signers[key] = KeySigner(key)
        return found

    def zone_of(self, name: str) -> ZoneKeys | None:
        """The keys of the most specific served zone holding `name` (text, absolute, lower case);
        None when that zone is not signed (or no zone holds the name)."""
        while True:
            if name in self.served:
                return self.zones.get(name)
            if name == ".":
                return None
            name = name.split(".", 1)[1] or "."

    def next_refresh(self) -> float | None:
        """When the earliest cached signature needs to be made anew (None: nothing cached)."""
        return self._earliest if self._cache else None

    def forget_due(self, now: float) -> int:
        """Drop cached signatures due for refresh (the next compilation signs those in use again)."""
        due = [k for k, (at, _) in self._cache.items() if at <= now]
        for k in due:
            del self._cache[k]
        self._forget_denials()
        self._earliest = min((at for at, _ in self._cache.values()), default=float("inf"))
        return len(due)

    def _times(self, zone: ZoneKeys, now: int) -> tuple[int, int, int]:
        """(inception, expiration, refresh at) of a signature made now."""
        d = zone.dnssec
        expiration = now + d.signature_validity - (self.rng.randrange(d.jitter + 1) if d.jitter else 0)
        return now - INCEPTION_SLACK, expiration, expiration - d.refresh_before

    def rrsig_rdatas(
        self,
        zone: ZoneKeys,
        owner: bytes,
        rdtype: int,
        ttl: int,
        rdatas: Sequence[bytes],
        *,
        synthesized: bool = False,
    ) -> tuple[bytes, ...]:
        """RRSIG rdata (wire) of every signing key for an RRset: `owner` in lower-case wire form,
        `rdatas` in canonical wire form (RFC 4034 6.2), in any order. `synthesized`: an RRset at a query
        name that is no name of the view (a wildcard's answer), cached in the bounded LRU."""
        canonical = tuple(sorted(set(rdatas)))
        keys = zone.keyset if rdtype in KEYSET_TYPES else zone.others
        key: CacheKey = (zone.origin_wire, owner, rdtype, ttl, canonical, keys)
        now = int(self.wall())
        found = self._synth.get(key) if synthesized else self._cache.get(key)
        if found is not None and found[0] > now:
            if synthesized:
                self._synth.move_to_end(key)
            return found[1]
        inception, expiration, refresh_at = self._times(zone, now)
        rr_head = owner + struct.pack("!HHI", rdtype, IN, ttl)
        records = b"".join(rr_head + struct.pack("!H", len(rd)) + rd for rd in canonical)
        labels = name_labels(owner)
        out = []
        for signer in keys:
            head = struct.pack("!HBBI", rdtype, signer.algorithm, labels, ttl)
            fields = head + struct.pack("!IIH", expiration, inception, signer.tag) + zone.origin_wire
            out.append(fields + signer.sign(fields + records))
            self.signatures_made += 1
        result = tuple(out)
        if synthesized:  # checked for expiry when found: not in `_earliest`
            self._synth[key] = (refresh_at, result)
            self._synth.move_to_end(key)
            while len(self._synth) > SYNTH_CACHE_MAX:
                self._synth.popitem(last=False)
            return result
        self._cache[key] = (refresh_at, result)
        self._earliest = min(self._earliest, refresh_at)
        return result

    def synthesized_count(self) -> int:
        """RRsets of synthesized answers whose signatures are cached (at most SYNTH_CACHE_MAX)."""
        return len(self._synth)

    def rrsig_rrset(self, rrset: dns.rrset.RRset, synthesized: bool = False) -> dns.rrset.RRset | None:
        """The RRSIG RRset of an RRset (as dnspython objects), or None outside the signed zones."""
        zone = self.zone_of(rrset.name.to_text().lower())
        if zone is None:
            return None
        owner = rrset.name.canonicalize().to_wire() or b""
        wires = [rd.to_digestable() for rd in rrset]
        sigs = self.rrsig_rdatas(zone, owner, rrset.rdtype, rrset.ttl, wires, synthesized=synthesized)
        out = dns.rrset.RRset(rrset.name, IN, dns.rdatatype.RRSIG, rrset.rdtype)
        for sig in sigs:
            out.add(dns.rdata.from_wire(IN, dns.rdatatype.RRSIG, sig, 0, len(sig)), rrset.ttl)
        return out

    def with_rrsigs(
        self, rrsets: Iterable[dns.rrset.RRset], synthesized: bool = False
    ) -> list[dns.rrset.RRset]:
        """RRsets each followed by its RRSIG RRset (when in a signed zone)."""
        out = []
        for rrset in rrsets:
            out.append(rrset)
            sigs = self.rrsig_rrset(rrset, synthesized)
            if sigs is not None:
                out.append(sigs)
        return out

    def nsec_rrset(self, qname: str, ttl: int, types: Iterable[int]) -> dns.rrset.RRset:
        """The compact-denial NSEC at `qname`: next name `\\000.qname`, the bitmap of `types` plus
        RRSIG and NSEC."""
        name = dns_name(qname)
        bitmap = type_bitmap((*types, RRSIG, NSEC))
        wire = b"\x01\x00" + (name.to_wire() or b"") + bitmap
        out = dns.rrset.RRset(name, IN, dns.rdatatype.NSEC)
        out.add(dns.rdata.from_wire(IN, dns.rdatatype.NSEC, wire, 0, len(wire)), ttl)
        return out

    def denial_records(self, zone: ZoneKeys, qname: bytes, ttl: int) -> bytes:
        """The NSEC of a nonexistent name and its RRSIGs as wire records owned by the question name
        (a pointer to offset 12); `qname` in lower-case wire form. Cached per name."""
        return self._denial(zone, qname, ttl)[2]

    def _denial(self, zone: ZoneKeys, qname: bytes, ttl: int) -> tuple[int, tuple[bytes, ...], bytes]:
        """(refresh at, RRSIG rdatas, wire records) of a nonexistent name's NSEC."""
        found = self._denials.get(qname)
        if found is not None and found[0] > self.wall():
            return found
        rdata_wire = b"\x01\x00" + qname + _NXNAME_BITMAP
        sigs = self.rrsig_rdatas(zone, qname, NSEC, ttl, (rdata_wire,))
        # The denial of one name is not kept in the RRset cache: it has its own, bounded one.
        refresh_at, _ = self._cache.pop((zone.origin_wire, qname, NSEC, ttl, (rdata_wire,), zone.others))
        parts = [struct.pack("!HHHIH", 0xC00C, NSEC, IN, ttl, len(rdata_wire)), rdata_wire]
        for sig in sigs:
            parts.append(struct.pack("!HHHIH", 0xC00C, RRSIG, IN, ttl, len(sig)))
            parts.append(sig)
        out = (refresh_at, sigs, b"".join(parts))
        if len(self._denials) >= DENIAL_CACHE_MAX:
            self._forget_denials()
        self._denials[qname] = out
        self.denial_wire[qname] = out[2]
        if self.denial_native is not None:
            self.denial_native.put(qname, out[2])
        self._earliest = min(self._earliest, refresh_at)
        return out

    def _forget_denials(self) -> None:
        self._denials.clear()
        self.denial_wire.clear()
        if self.denial_native is not None:
            self.denial_native.clear()

    def signed_reply(
        self,
        qname: str,
        data: NameData | None,
        answer: Answer,
        *,
        compact_ok: bool = False,
        deniers: Mapping[bytes, Denier] | None = None,
        synthesized: bool = False,
    ) -> SignedReply | None:
        """The signed form of an answer to a DO query for `qname` (lower-case text), or None when it
        is not signed (outside the signed zones, or an rcode other than NOERROR/NXDOMAIN).
        `data` is the node that answers the name (None: the name does not exist); `synthesized`: that
        node is the wildcard that answers `qname` (RFC 4592), and the name is no name of the view.
        `deniers` (the table's, by zone origin in wire form) answer a nonexistent name from the NSEC
        chain past the signing budget.

        A wildcard-made name exists (RFC 4592): a type it lacks gets NODATA with the compact NSEC at
        the name asked whose bitmap is the wildcard's types, signed there like its positive answers;
        never a denial of the name (NXNAME), which a resolver would apply to the wildcard's answers."""
        zone = self.zone_of(qname)
        if zone is None or answer.rcode not in (Rcode.NOERROR, Rcode.NXDOMAIN, Rcode.YXDOMAIN):
            return None
        if answer.referral is not None:  # after CNAMEs (into the cut), signed as any answer
            return self.signed_referral(answer.referral, self.answer_rrsigs(to_rrsets(answer.answer)))
        if answer.answer:
            rcode, proof, compact_nx = self._chain_end(answer, compact_ok)
            return SignedReply(
                rcode,
                self.answer_rrsigs(to_rrsets(answer.answer), synthesized=synthesized),
                [*self.with_rrsigs(to_rrsets(answer.authority)), *proof],
                self.with_rrsigs(to_rrsets(answer.additional)),
                compact_nx=compact_nx,
            )
        soa = [rr for rr in answer.authority if rr.rtype == "SOA"]
        ttl = soa[0].ttl if soa else 0
        exists = answer.rcode == Rcode.NOERROR and data is not None
        if not exists and data is None and deniers is not None:
            denier = deniers.get(zone.origin_wire)
            links = denier.chain_denial(dns_name(qname).to_wire() or b"") if denier is not None else None
            if links is not None:  # RFC 4035 3.1.3.2, as the fast path answers past the budget
                return self.chain_reply(soa, links, ttl)
        types = existing_types(data) if exists and data is not None else (NXNAME,)
        rcode = Rcode.NXDOMAIN if not exists and compact_ok else Rcode.NOERROR
        if exists:
            denial = self.with_rrsigs([self.nsec_rrset(qname, ttl, types)], synthesized=synthesized)
        else:
            denial = list(self.nxname_rrsets(zone, qname, ttl))
        authority = [*self.with_rrsigs(to_rrsets(soa)), *denial]
        return SignedReply(rcode, [], authority, [], compact_nx=not exists)

    def nxname_rrsets(self, zone: ZoneKeys, qname: str, ttl: int) -> tuple[dns.rrset.RRset, dns.rrset.RRset]:
        """The compact denial of the nonexistent `qname` (lower-case text): its NSEC (bitmap RRSIG NSEC
        NXNAME) and RRSIG RRsets, with the signatures of the fast path's (the signer's denial cache)."""
        nsec = self.nsec_rrset(qname, ttl, (NXNAME,))
        sigs = dns.rrset.RRset(nsec.name, IN, dns.rdatatype.RRSIG, dns.rdatatype.NSEC)
        for sig in self._denial(zone, nsec.name.to_wire() or b"", ttl)[1]:
            sigs.add(dns.rdata.from_wire(IN, dns.rdatatype.RRSIG, sig, 0, len(sig)), ttl)
        return nsec, sigs

    def chain_reply(self, soa: Sequence[Rr], links: Sequence[Link], ttl: int) -> SignedReply:
        """NXDOMAIN from the NSEC chain (RFC 4035 3.1.3.2): the SOA and the links that deny the name,
        each with its RRSIGs."""
        chain = [self._chain_rrsets(link.owner, link.rdata, link.sigs, ttl) for link in links]
        authority = [*self.with_rrsigs(to_rrsets(soa)), *(r for pair in chain for r in pair)]
        return SignedReply(Rcode.NXDOMAIN, [], authority, [])

    def _chain_end(self, answer: Answer, compact_ok: bool) -> tuple[int, list[dns.rrset.RRset], bool]:
        """(rcode, proof, compact) of a positive-looking answer: a CNAME/DNAME chain that ends in NODATA
        or NXDOMAIN in a signed zone gets the NSEC of its last name (compact, like the denials of names
        asked for: NXNAME for a name that does not exist, rcode NOERROR unless CO asks for NXDOMAIN);
        YXDOMAIN (a DNAME's too long name) stays; everything else is NOERROR."""
        denied = answer.denied
        if denied is None or self.zone_of(denied[0]) is None:
            kept = answer.rcode if answer.rcode == Rcode.YXDOMAIN or denied is not None else Rcode.NOERROR
            return kept, [], False
        name, types = denied
        soa = [rr for rr in answer.authority if rr.rtype == "SOA"]
        ttl = soa[0].ttl if soa else 0
        gone = answer.rcode == Rcode.NXDOMAIN
        codes = (NXNAME,) if gone else tuple(int(dns.rdatatype.from_text(t)) for t in types)
        proof = self.with_rrsigs([self.nsec_rrset(name, ttl, codes)], synthesized=gone)
        rcode = Rcode.NXDOMAIN if gone and compact_ok else Rcode.NOERROR
        return rcode, proof, gone

    def signed_referral(self, referral: Referral, answer: list[dns.rrset.RRset] | None = None) -> SignedReply:
        """A referral to a DO query (RFC 4035 3.1.4): the NS set unsigned, then the cut's DS RRset with
        its RRSIGs, or the NSEC of the cut (its types: NS, and RRSIG NSEC; no DS, no SOA) with its
        RRSIGs proving there is no DS; the glue unsigned. `answer`: the signed CNAMEs before it."""
        if referral.ds:
            proof = self.with_rrsigs(to_rrsets(referral.ds))
        else:
            proof = self.with_rrsigs([self.nsec_rrset(referral.cut, referral.nsec_ttl, (NS_TYPE,))])
        ns = to_rrsets(referral.ns)
        return SignedReply(Rcode.NOERROR, answer or [], [*ns, *proof], to_rrsets(referral.glue))

    def answer_rrsigs(
        self, rrsets: Iterable[dns.rrset.RRset], synthesized: bool = False
    ) -> list[dns.rrset.RRset]:
        """An answer section's RRsets each followed by its RRSIGs, but a CNAME a DNAME of the same
        answer synthesized (owned below the DNAME's owner), which is sent unsigned (RFC 6672 5.3.1)."""
        rrsets = list(rrsets)
        owners = [r.name for r in rrsets if r.rdtype == dns.rdatatype.DNAME]
        if not owners:
            return self.with_rrsigs(rrsets, synthesized)
        out: list[dns.rrset.RRset] = []
        for rrset in rrsets:
            made = rrset.rdtype == dns.rdatatype.CNAME and any(
                rrset.name.is_subdomain(o) and rrset.name != o for o in owners
            )
            out.extend([rrset] if made else self.with_rrsigs([rrset], synthesized))
        return out

    @staticmethod
    def _chain_rrsets(
        owner: bytes, rdata: bytes, sigs: Sequence[bytes], ttl: int
    ) -> tuple[dns.rrset.RRset, dns.rrset.RRset]:
        """A chain link's NSEC and RRSIG RRsets (dnspython objects)."""
        name = dns.name.from_wire(owner, 0)[0]
        nsec = dns.rrset.RRset(name, IN, dns.rdatatype.NSEC)
        nsec.add(dns.rdata.from_wire(IN, dns.rdatatype.NSEC, rdata, 0, len(rdata)), ttl)
        out = dns.rrset.RRset(name, IN, dns.rdatatype.RRSIG, dns.rdatatype.NSEC)
        for sig in sigs:
            out.add(dns.rdata.from_wire(IN, dns.rdatatype.RRSIG, sig, 0, len(sig)), ttl)
        return nsec, out


_NXNAME_BITMAP = type_bitmap((RRSIG, NSEC, NXNAME))


@dataclass(frozen=True, slots=True)
class SignedReply:
    """A signed response's rcode and sections as dnspython RRsets (RRSIGs after their RRsets)."""

    rcode: int
    answer: list[dns.rrset.RRset]
    authority: list[dns.rrset.RRset]
    additional: list[dns.rrset.RRset]
    compact_nx: bool = False  # an RFC 9824 compact denial of a nonexistent name (CO applies)


def existing_types(data: NameData) -> tuple[int, ...]:
    """The types with data at a name now (the NODATA bitmap, besides RRSIG and NSEC); at a zone cut the
    parent's own, NS and DS (glue at the cut is the child's)."""
    cut = data.referral is not None
    return tuple(
        int(dns.rdatatype.from_text(t))
        for t, o in data.outcomes.items()
        if not isinstance(o, Negative) and (not cut or t in ("NS", "DS"))
    )


def signer_for(
    zones: Iterable[tuple[str, Dnssec | None]], old: Signer | None, wall: Callable[[], float]
) -> Signer | None:
    """A new signer for zones with their settings, sharing `old`'s cached signatures (tables that use
    `old` keep signing as before), or None when no zone is signed."""
    every = list(zones)
    signed = {origin: d for origin, d in every if d is not None}
    if not signed:
        return None
    return Signer(signed, wall, served=[origin for origin, _ in every], share=old)
