"""Denial of existence past the signing budget: a pre-signed NSEC chain (RFC 4034/4035) per signed zone.

RFC 9824 compact denial owns its NSEC at the query name, so every nonexistent name needs one signature
of its own. A flood of random names would sign on the query path at every query; the zone's
`denial_signing_rate` (wire/dnssec.py `DenialBudget`) bounds those signatures, and past it a
nonexistent name is answered the traditional way (RFC 4035 3.1.3.2): NXDOMAIN with the NSEC that
covers the name and the NSEC that covers the wildcard at its closest encloser, both links of a chain
over the zone's names that was signed when the table was built.

The chain holds every name of the zone that owns records, plus the apex of each served zone cut below
it (bitmap NS: a delegation NSEC, which validators never use for names below it). Empty
non-terminals have no link (as in a zone signed by dnssec-signzone). A link's bitmap is every type the
name answers specially, whatever the health: a resolver that synthesizes answers from the chain
(RFC 8198) never denies a type that may come back, and health changes leave the chain untouched.
Links are signed through the signer's cache, so a rebuild signs only the links whose content changed
(a new name: itself and its predecessor).

Lookups bisect over canonical order (RFC 4034 6.1): a name's key is the tuple of its labels below
the origin, reversed, in lower case; tuples of bytes compare exactly as canonical order does.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import NamedTuple, cast

import dns.name
import dns.rdatatype

from gslbd.answer import View
from gslbd.wire.dnssec import NSEC, RRSIG, Signer, ZoneKeys, type_bitmap
from gslbd.wire.render import IN

Key = tuple[bytes, ...]
Heads = tuple[bytes, bytes, bytes, bytes]
# Compression pointers to every offset a zone's suffix can have in a question.
_WILD = b"*"


class Link(NamedTuple):
    """One NSEC of the chain: its owner (lower-case wire form), the types it lists besides RRSIG and
    NSEC, its rdata and RRSIG rdatas, and `parts`: the NSEC and RRSIG records with every owner
    written as its labels below the origin, so that `pointer.join(parts)` puts a compression pointer
    to the origin after each (the origin's place in the question)."""

    owner: bytes
    types: tuple[int, ...]
    rdata: bytes
    sigs: tuple[bytes, ...]
    parts: tuple[bytes, ...]


def rel_key(rel: bytes) -> Key:
    """The canonical-order key of a name from its labels below the origin in wire form (no root)."""
    labels = []
    pos = 0
    end = len(rel)
    while pos < end:
        size = rel[pos]
        labels.append(rel[pos + 1 : pos + 1 + size])
        pos += size + 1
    labels.reverse()
    return tuple(labels)


def key_wire(key: Key, origin: bytes) -> bytes:
    """The wire form of the name of `key` in the zone of `origin` (wire)."""
    return b"".join(bytes((len(label),)) + label for label in reversed(key)) + origin


def _common(a: Key, b: Key) -> int:
    """How many leading labels (from the origin down) two keys share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class NsecChain:
    """The signed NSEC chain of one zone; never changed after it is made (`updated` makes another).
    `keys` and `links` are in canonical order; the apex (key `()`) is first. `flat` holds the keys
    as bytes that compare the same way (each label followed by a zero byte: names of the view have
    no zero byte in a label), for C's lookup (`Denier.native_parts`)."""

    __slots__ = (
        "flat",
        "keys",
        "links",
        "origin",
        "origin_len",
        "sig_count",
        "ttl",
    )

    def __init__(
        self, origin: bytes, ttl: int, keys: list[Key], links: list[Link], flat: list[bytes] | None = None
    ) -> None:
        self.origin = origin
        self.origin_len = len(origin)
        self.ttl = ttl
        self.keys = keys
        self.flat = flat if flat is not None else [b"".join(label + b"\0" for label in key) for key in keys]
        self.links = links
        self.sig_count = len(links[0].sigs)

    def _covering(self, key: Key) -> int:
        i = bisect_right(self.keys, key) - 1
        return -1 if self.keys[i] == key else i

    def cover(self, qname: bytes) -> tuple[int, int] | None:
        """The indexes of the links that prove `qname` (lower-case wire form, inside the zone, not
        the apex) does not exist: the one covering it and the one covering the wildcard at its closest
        encloser (the same when one covers both). None when the name exists (in the chain, or as an
        empty non-terminal above names of it) or that wildcard does."""
        end = len(qname) - self.origin_len
        if 0 in qname[:end]:  # a zero byte inside a label (length bytes are never 0): compare as tuples
            return self._cover_key(rel_key(qname[:end]))
        labels = []
        pos = 0
        while pos < end:
            size = qname[pos]
            labels.append(qname[pos + 1 : pos + 1 + size])
            pos += size + 1
        labels.reverse()
        flat = b"\0".join(labels) + b"\0"
        chain = self.flat
        i = bisect_right(chain, flat) - 1
        if chain[i] == flat:
            return None
        # The closest encloser: the longest ancestor with a name of the chain below it (or itself in
        # the chain). Such a name lies next to the query name in canonical order, so the ancestor is
        # a prefix of its neighbour before or after.
        before = chain[i]
        after = chain[i + 1] if i + 1 < len(chain) else b""
        if after.startswith(flat):
            return None  # an empty non-terminal: it exists
        cut = len(flat) - len(labels[-1]) - 1
        while cut > 0:
            ancestor = flat[:cut]
            if before.startswith(ancestor) or after.startswith(ancestor):
                break
            cut = flat.rfind(b"\0", 0, cut - 1) + 1
        wild = flat[:cut] + b"*\0"
        j = bisect_right(chain, wild) - 1
        if chain[j] == wild:
            return None
        return i, j

    def _cover_key(self, key: Key) -> tuple[int, int] | None:
        """`cover` by tuple keys (for names with a zero byte inside a label)."""
        keys = self.keys
        i = bisect_right(keys, key) - 1
        if keys[i] == key:
            return None
        after = keys[i + 1] if i + 1 < len(keys) else ()
        if after[: len(key)] == key:
            return None  # an empty non-terminal: it exists
        depth = max(_common(key, keys[i]), _common(key, after))
        j = self._covering((*key[:depth], _WILD))
        return None if j < 0 else (i, j)

    def updated(
        self, signer: Signer, zone: ZoneKeys, changes: Mapping[Key, tuple[int, ...] | None]
    ) -> NsecChain:
        """This chain with names added, changed (`types`) or removed (None); itself when nothing
        changes. Only the links of changed names and their predecessors are made anew; the lists are
        copied, never changed in place."""
        effective: dict[Key, tuple[int, ...] | None] = {}
        for key, types in changes.items():
            if key == ():
                continue  # the apex changes only with the config (a full compilation)
            at = bisect_left(self.keys, key)
            present = at < len(self.keys) and self.keys[at] == key
            if (types is None and present) or (
                types is not None and (not present or self.links[at].types != types)
            ):
                effective[key] = types
        if not effective:
            return self
        keys = list(self.keys)
        flat = list(self.flat)
        links: list[Link | None] = list(self.links)
        for key, types in effective.items():
            at = bisect_left(keys, key)
            if types is None:
                del keys[at], flat[at], links[at]
            elif at < len(keys) and keys[at] == key:
                links[at] = None
            else:
                keys.insert(at, key)
                flat.insert(at, b"".join(label + b"\0" for label in key))
                links.insert(at, None)
        # The links to make: the changed names' own, and their predecessors' (the next name changed).
        redo: dict[int, tuple[int, ...]] = {}
        for key, types in effective.items():
            at = bisect_left(keys, key)
            if types is not None:
                redo[at] = types
            before = (at - 1) % len(keys)
            found = links[before]
            if before not in redo and found is not None:
                redo[before] = found.types
        return _linked(signer, zone, self.ttl, keys, links, redo, flat)


def _linked(
    signer: Signer,
    zone: ZoneKeys,
    ttl: int,
    keys: list[Key],
    links: list[Link | None],
    redo: Mapping[int, tuple[int, ...]],
    flat: list[bytes] | None = None,
) -> NsecChain:
    """A chain over `keys` with the links at the indexes of `redo` made (with those types), signed
    through the signer's cache; every other link is kept."""
    origin = zone.origin_wire
    count = len(keys)
    for i, types in redo.items():
        owner = key_wire(keys[i], origin)
        rdata = key_wire(keys[(i + 1) % count], origin) + type_bitmap((*types, RRSIG, NSEC))
        sigs = signer.rrsig_rdatas(zone, owner, NSEC, ttl, (rdata,))
        rel = owner[: len(owner) - len(origin)]
        parts = [rel, struct.pack("!HHIH", NSEC, IN, ttl, len(rdata)) + rdata]
        for sig in sigs:
            parts[-1] += rel
            parts.append(struct.pack("!HHIH", RRSIG, IN, ttl, len(sig)) + sig)
        links[i] = Link(owner, types, rdata, sigs, tuple(parts))
    # Every None was at an index of `redo` (NsecChain.updated, build_chain): all links are made.
    return NsecChain(origin, ttl, keys, cast(list[Link], links), flat)


def build_chain(signer: Signer, zone: ZoneKeys, ttl: int, names: Mapping[Key, tuple[int, ...]]) -> NsecChain:
    """The signed chain over `names` (keys and their types; the apex, key `()`, must be one)."""
    keys = sorted(names)
    return _linked(signer, zone, ttl, keys, [None] * len(keys), {i: names[k] for i, k in enumerate(keys)})


@lru_cache(maxsize=512)
def _type_code(rtype: str) -> int:
    return int(dns.rdatatype.from_text(rtype))


def name_key(name: str, origin: str) -> Key:
    """The canonical-order key of `name` (absolute text, lower case) in the zone `origin`."""
    if name == origin:
        return ()
    rel = name[: len(name) - len(origin) - (origin != ".")]
    if "\\" not in rel:
        return tuple(label.encode() for label in reversed(rel.split(".")))
    labels = dns.name.from_text(name).canonicalize().labels
    return tuple(reversed(labels[: len(labels) - len(dns.name.from_text(origin).labels)]))


def chain_types(view: View, name: str) -> tuple[int, ...] | None:
    """The types the chain lists at `name` (None: no link there, an empty non-terminal)."""
    data = view.names[name]
    if not data.outcomes:
        return None
    referral = data.referral
    if referral is not None:  # below a zone cut nothing is ours (RFC 4035 2.3); at it, NS and DS only
        if name != referral.cut:
            return None
        return tuple(sorted({_type_code(t) for t in data.outcomes if t in ("NS", "DS")}))
    return tuple(sorted({_type_code(t) for t in data.outcomes}))


def chain_names(view: View, origins: Iterable[str]) -> dict[str, dict[Key, tuple[int, ...]]]:
    """For each of `origins` (served zones): the keys and types of the names its chain links, in one
    pass over the view's names."""
    out: dict[str, dict[Key, tuple[int, ...]]] = {origin: {} for origin in origins}
    for name, data in view.names.items():
        found = out.get(data.zone.origin)
        if found is not None and data.outcomes:
            types = chain_types(view, name)
            if types is not None:
                found[name_key(name, data.zone.origin)] = types
    for cut in view.zones:  # a served zone below one of `origins`: a delegation link in the parent
        if cut == ".":
            continue
        parent = view.find_zone(cut.split(".", 1)[1] or ".")
        if parent is not None and parent.origin in out:
            out[parent.origin][name_key(cut, parent.origin)] = (int(dns.rdatatype.NS),)
    return out


def chain_changes(
    view: View, origin: str, changed: Iterable[str], removed: Iterable[str]
) -> dict[Key, tuple[int, ...] | None]:
    """What an incremental change does to the chain of `origin`: names added or changed (their types)
    or gone (None). Names of other zones are left out."""
    out: dict[Key, tuple[int, ...] | None] = {}
    for name in removed:
        if _in_zone(view, name, origin):
            out[name_key(name, origin)] = None
    for name in changed:
        data = view.names[name]
        if data.zone.origin == origin:
            out[name_key(name, origin)] = chain_types(view, name)
    return out


def _in_zone(view: View, name: str, origin: str) -> bool:
    zone = view.find_zone(name)
    return zone is not None and zone.origin == origin


class Denier:
    """A signed zone's denial of nonexistent names past its signing budget: the NSEC chain and the
    NXDOMAIN heads C answers from (`native_parts`), and the slow path's choice (`chain_denial`)."""

    __slots__ = ("_budget", "_nx", "_signer", "_zone", "chain")

    def __init__(
        self, signer: Signer, zone: ZoneKeys, nxdomain: tuple[Heads, Heads, Heads], chain: NsecChain
    ) -> None:
        self._signer = signer
        self._zone = zone
        self._nx = nxdomain  # one link, two links, truncated
        self._budget = signer.budgets[zone.origin]
        self.chain = chain

    def native_parts(self) -> tuple[object, ...] | None:
        """What the C table needs to answer past the budget as the slow path does (wire/ctable.py): the
        NXDOMAIN heads (one link, two, truncated), the chain's keys and each link's parts, the budget's
        gate and the signer's compact denials; None without the C extension."""
        gate = self._budget.gate
        if gate is None:
            return None
        nx = self._nx
        chain = self.chain
        return (
            b"".join(nx[0]),
            b"".join(nx[1]),
            b"".join(nx[2]),
            tuple(chain.flat),
            tuple(link.parts for link in chain.links),
            gate,
            self._signer.denial_native,
        )

    def with_chain(self, chain: NsecChain) -> Denier:
        """The same denier over another chain (an incremental table update)."""
        return Denier(self._signer, self._zone, self._nx, chain)

    def chain_denial(self, qname: bytes) -> list[Link] | None:
        """The links that deny `qname` when the budget is spent; None when a compact denial is made
        (the slow path's choice, the same as C's)."""
        if qname in self._signer.denial_wire or self._budget.take():
            return None
        return self.chain_links(qname)

    def chain_links(self, qname: bytes) -> list[Link] | None:
        """The links that deny `qname` (lower-case wire form) whatever the budget: the NSEC covering
        it and the one covering the wildcard at its closest encloser (one when the same); None when
        the chain cannot deny it (NsecChain.cover)."""
        found = self.chain.cover(qname)
        if found is None:
            return None
        i, j = found
        return [self.chain.links[i]] if i == j else [self.chain.links[i], self.chain.links[j]]
