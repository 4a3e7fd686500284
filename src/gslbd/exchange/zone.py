"""The exchange zone: this site's publication as one transferable zone per served zone, with a journal.

For site `eu` and served zone `gslb.example.com.` the exchange zone is

    _gslbd-exchange-eu.gslb.example.com.   SOA  <mname> hostmaster.<apex> <serial> ...
    _gslbd-exchange-eu.gslb.example.com.   NS   the zone's nameservers (when it lists any)
    <label>._gslbd-exchange-eu.gslb...     A / AAAA   what localtargets-<label>.gslb.example.com. answers

so its content is exactly the k8gb-compatible `localtargets-*` publication (answer/exchange_names.py),
which stays published. With `peers.quorum` the zone also holds this site's raw verdicts (its votes,
state/quorum.py), one TXT RRset per service, each string one vote:

    <label>.votes._gslbd-exchange-eu.gslb...   TXT  "192.0.2.10=up" "198.51.100.10=down"

transferred like the rest (an IXFR of a flipped vote deletes one string and adds one). A peer that
reads only A/AAAA ignores them; a peer that publishes none casts no vote. Load feedback adds the load
figures of this site's own endpoints the same way (answer/exchange_names.py `load_rdata`):

    <label>.load._gslbd-exchange-eu.gslb...    TXT  "192.0.2.10=0.420" "192.0.2.11=0.950,out"

A figure changes only when the used figure moves past the dead band (policy/load.py), so noise does
not step the serial.

The heartbeat is not part of the versioned content (it changes every peers.interval/2 and would make
every poll a transfer): it rides in the additional section of every
answer to the apex SOA (exchange/xfrserve.py).

`ZoneJournal` keeps the content and the changes of the last `peers.journal` serial steps, so that an
IXFR (RFC 1995) from a recent serial is answered with the condensed difference; an older serial gets
the whole zone. The serial starts at the wall clock in tenths of a second (so that a restarted site
does not reuse the serials of its previous run) and follows it: each change sets the serial to
max(serial + 1, now in tenths of a second), modulo 2**32. Pure: no I/O, times are passed in.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from gslbd.answer.exchange_names import LOADS_PREFIX, LOCALTARGETS_PREFIX, VOTES_PREFIX

A, NS, SOA, AAAA, TXT = 1, 2, 6, 28, 16
SERIAL_MODULO = 2**32
SLACK = 1024  # changed RRsets the journal may hold beyond the zone's size

# (owner label relative to the apex, type): one RRset of the content
Key = tuple[str, int]
# (ttl, rdata wire forms, sorted)
RRset = tuple[int, tuple[bytes, ...]]
# key -> (the RRset before, the RRset after); None: absent
Change = tuple[RRset | None, RRset | None]


def address_rdata(address: str) -> tuple[int, bytes]:
    """(A or AAAA, the packed address)."""
    ip = ipaddress.ip_address(address)
    return (AAAA if ip.version == 6 else A), ip.packed


VOTES_LABEL = "votes"  # the votes of service <label> are TXT at <label>.votes.<apex>
LOAD_LABEL = "load"  # the load figures of service <label> are TXT at <label>.load.<apex>


def content_of(
    origin: str, names: Mapping[str, tuple[str, ...]], ttls: Mapping[str, int]
) -> dict[Key, RRset]:
    """The content of one exchange zone from one zone's publication (localtargets name -> addresses,
    votes name -> votes, as `exchange_names.published` gives it); `ttls`: localtargets name -> the
    service TTL."""
    out: dict[Key, RRset] = {}
    for name, data in names.items():
        out.update(publication_rrsets(name, origin, data, ttls))
    return out


def publication_rrsets(
    name: str, origin: str, data: tuple[str, ...], ttls: Mapping[str, int]
) -> dict[Key, RRset]:
    """The RRsets of one publication entry (none for a name that is neither kind)."""
    key_label = label_of(name, origin)
    if key_label is not None:
        return rrsets_of(key_label, data, ttls.get(name, 0))
    txt = votes_label_of(name, origin) or load_label_of(name, origin)
    if txt is not None and data:
        return {(txt, TXT): (0, tuple(sorted({txt_wire(v) for v in data})))}
    return {}


def publication_keys(name: str, origin: str) -> tuple[Key, ...]:
    """Every content key a publication entry may own (to clear it before the new RRsets)."""
    key_label = label_of(name, origin)
    if key_label is not None:
        return ((key_label, A), (key_label, AAAA))
    txt = votes_label_of(name, origin) or load_label_of(name, origin)
    return ((txt, TXT),) if txt is not None else ()


def txt_wire(text: str) -> bytes:
    """One TXT string as rdata (at most 255 bytes: a vote is an address and a word)."""
    data = text.encode("ascii")[:255]
    return bytes([len(data)]) + data


def votes_label_of(name: str, origin: str) -> str | None:
    """`app.votes` for `votes-app.<origin>`; None for another name."""
    suffix = "." + origin
    if not name.startswith(VOTES_PREFIX) or not name.endswith(suffix):
        return None
    label = name[len(VOTES_PREFIX) : -len(suffix)]
    return f"{label}.{VOTES_LABEL}" if label else None


def load_label_of(name: str, origin: str) -> str | None:
    """`app.load` for `loads-app.<origin>`; None for another name."""
    suffix = "." + origin
    if not name.startswith(LOADS_PREFIX) or not name.endswith(suffix):
        return None
    label = name[len(LOADS_PREFIX) : -len(suffix)]
    return f"{label}.{LOAD_LABEL}" if label else None


def rrsets_of(label: str, addresses: tuple[str, ...], ttl: int) -> dict[Key, RRset]:
    by_type: dict[int, list[bytes]] = {}
    for address in addresses:
        rtype, rdata = address_rdata(address)
        by_type.setdefault(rtype, []).append(rdata)
    return {(label, rtype): (ttl, tuple(sorted(set(rdatas)))) for rtype, rdatas in by_type.items()}


def label_of(localtargets: str, origin: str) -> str | None:
    """`app` for `localtargets-app.<origin>`; None for another name."""
    suffix = "." + origin
    if not localtargets.startswith(LOCALTARGETS_PREFIX) or not localtargets.endswith(suffix):
        return None
    return localtargets[len(LOCALTARGETS_PREFIX) : -len(suffix)] or None


def next_serial(serial: int, wall: float, per_second: int = 10) -> int:
    """The serial after `serial` at Unix time `wall`: one more, or the wall clock (in tenths of seconds
    by default; the public zones' SOA counts seconds) when later (serial arithmetic, RFC 1982)."""
    now = int(wall * per_second) % SERIAL_MODULO
    ahead = (now - serial) % SERIAL_MODULO
    if 1 <= ahead < 2**31:
        return now
    return (serial + 1) % SERIAL_MODULO


@dataclass(frozen=True, slots=True)
class Step:
    """One serial step: `changes` turn the content at `before` into the content at `after`."""

    before: int
    after: int
    changes: Mapping[Key, Change]


class ZoneJournal:
    """The content of one exchange zone, its serial, and the last `limit` steps (for IXFR).

    Steps are also dropped (oldest first) while they hold more changed RRsets in all than the zone has
    RRsets plus SLACK: the journal never holds much more than a second copy of the zone, and a
    difference that large would cost about as much as the whole zone."""

    def __init__(self, content: dict[Key, RRset], wall: float, limit: int) -> None:
        self.content = content
        self.serial = int(wall * 10) % SERIAL_MODULO
        self.limit = limit
        self.steps: deque[Step] = deque()
        self._held = 0  # changed RRsets in all steps

    def update(self, changes: Mapping[Key, RRset | None], wall: float) -> bool:
        """Apply new RRsets (None: gone) for some keys; a new serial when anything changed."""
        real: dict[Key, Change] = {}
        for key, new in changes.items():
            old = self.content.get(key)
            if old == new:
                continue
            real[key] = (old, new)
            if new is None:
                del self.content[key]
            else:
                self.content[key] = new
        if not real:
            return False
        after = next_serial(self.serial, wall)
        self.steps.append(Step(self.serial, after, real))
        self._held += len(real)
        self.serial = after
        while self.steps and (len(self.steps) > self.limit or self._held > len(self.content) + SLACK):
            self._held -= len(self.steps.popleft().changes)
        return True

    def replace(self, content: Mapping[Key, RRset], wall: float) -> bool:
        """Make the content `content` (a reload): the difference becomes one step."""
        changes: dict[Key, RRset | None] = {key: None for key in self.content if key not in content}
        changes.update(content)
        return self.update(changes, wall)

    def since(self, serial: int) -> dict[Key, Change] | None:
        """The condensed changes from `serial` to the current one ({} when current), or None when the
        journal does not reach back to `serial` (the caller sends the whole zone)."""
        if serial == self.serial:
            return {}
        start = next((i for i, step in enumerate(self.steps) if step.before == serial), None)
        if start is None:
            return None
        out: dict[Key, Change] = {}
        for index in range(start, len(self.steps)):
            for key, (old, new) in self.steps[index].changes.items():
                first = out[key][0] if key in out else old
                out[key] = (first, new)
        return {key: change for key, change in out.items() if change[0] != change[1]}


def record_diff(change: Change) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    """The (ttl, rdata) records an IXFR deletes and adds for one RRset change."""
    old, new = change
    if old is not None and new is not None and old[0] == new[0]:
        gone, came = set(old[1]) - set(new[1]), set(new[1]) - set(old[1])
        return [(old[0], r) for r in sorted(gone)], [(new[0], r) for r in sorted(came)]
    deleted = [(old[0], r) for r in old[1]] if old is not None else []
    added = [(new[0], r) for r in new[1]] if new is not None else []
    return deleted, added


def content_records(content: Mapping[Key, RRset]) -> Iterator[tuple[str, int, int, bytes]]:
    """Every (label, type, ttl, rdata) of a content."""
    for (label, rtype), (ttl, rdatas) in content.items():
        for rdata in rdatas:
            yield label, rtype, ttl, rdata
