"""The query path: a hand-written parser over precompiled answers, and the slow path for the rest.

`Responder.handle` is the one entry point the server calls. It tries `fast_answer`, which takes the
common shapes of query (one question of class IN, no records but an optional OPT of version 0 with
valid options) and answers them with bytes from the `AnswerTable`: the query's ID, a precompiled
header tail, the query's own question bytes (so the letter case is kept), precompiled records and,
when the query had EDNS, our OPT record (with the ECS option echoed). Everything else, and anything
it is unsure about, returns None and goes to the dnspython slow path, which has the complete
behaviour. No dnspython, no logging and no object beyond the response bytes on the fast path.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import time
from dataclasses import replace

from gslbd.answer import View
from gslbd.cow import MASK as SHARD_MASK
from gslbd.policy.scope import echoed, plan_scope
from gslbd.wire import ctable
from gslbd.wire.cguard import NativeGuard
from gslbd.wire.compile import AnswerTable, Entry, Heads, compile_answer, count_answers, key_name, nx_soa
from gslbd.wire.ctable import CTable, Fallback
from gslbd.wire.guard import AnyGuard, guard_for
from gslbd.wire.names import BadName, read_name
from gslbd.wire.notify import NotifyHook
from gslbd.wire.precheck import error_response, scan
from gslbd.wire.slowpath import slow_response
from gslbd.wire.transfer import ExchangeHook

log = logging.getLogger(__name__)

# Header bytes 4..10 of a plain query: QDCOUNT=1, ANCOUNT=0, NSCOUNT=0.
_COUNTS = b"\x00\x01\x00\x00\x00\x00"
_AR0 = b"\x00\x00"
_AR1 = b"\x00\x01"
_NO_ANSWERS = b"\x00\x00"  # ANCOUNT of a response without answer records
_NAME_MAX_END = 12 + 255
# Single bytes, prebuilt.
_BYTE = tuple(bytes((value,)) for value in range(256))
# EDNS options dnspython validates strictly (the fast path leaves queries carrying them to it).
_STRICT_OPTIONS = frozenset((15, 18, 22, 23, 24, 25))
_ECS = 8
_COOKIE = 10
_NSID = 3
_ZONE_TRANSFERS = (251, 252)
_NXNAME = 128  # RFC 9824's meta-type
_META_TYPES = (46, 47)  # RRSIG, NSEC
_CO = 0x40  # Compact Answers OK: the high byte of the OPT flags holds DO (0x80) and CO (0x40)


_CD = 0x10  # Checking Disabled, in the second byte of the header flags
_CO_FLAGS = b"\xc0"  # DO and CO, the high byte of the OPT flags
# Names the slow path answered while the table was partial, kept for the next fill step to compile first
# (server/build.py): at most this many between two steps.
WANTED_MAX = 4096
_CO_HEADS: dict[Heads, Heads] = {}


def _question_key(data: bytes) -> bytes | None:
    """The question name's table key (its wire form in lower case), or None when it cannot be read."""
    try:
        return read_name(data, 12)[0].lower()
    except BadName:
        return None


def co_heads(heads: Heads) -> Heads:
    """Header tails `heads` with rcode NXDOMAIN (a compact denial to a CO query, RFC 9824 4)."""
    found = _CO_HEADS.get(heads)
    if found is None:
        if len(_CO_HEADS) > 64:  # one pair per signed zone and table: a few
            _CO_HEADS.clear()
        a, b, c, d = (h[:1] + bytes((h[1] & 0xF0 | 3,)) + h[2:] for h in heads)
        found = _CO_HEADS[heads] = (a, b, c, d)
    return found


def _nxdomain_entry(entry: Entry) -> bool:
    """Whether some variant of an (unsigned) entry is NXDOMAIN (all_down: nxdomain)."""
    return any(v.heads[0][1] & 0xF == 3 for v in entry.variants)


def fast_answer(
    table: AnswerTable, data: bytes, src_ip: int, src_v6: bool, tcp: bool, rng: random.Random
) -> bytes | None:
    """The response from the precompiled table, or None when this query needs the slow path.

    May raise IndexError on a truncated packet (the caller falls back to the slow path)."""
    n = len(data)
    if n < 17 or data[2] & 0xFA or data[4:10] != _COUNTS:  # QR, opcode, TC; QD=1, AN=NS=0
        return None
    arcount = data[10:12]
    if arcount == _AR0:
        has_opt = False
    elif arcount == _AR1:
        has_opt = True
    else:
        return None

    # The question name. A known name is found with one lookup: its wire form ends at the first
    # zero byte; an unknown one is walked label by label to find its zone.
    shards = table.names.shards
    qend = data.find(0, 12) + 1
    if qend == 0:
        return None
    key = data[12:qend].lower()
    node = shards[hash(key) & SHARD_MASK].get(key)
    if node is None:
        suffixes = []  # offsets of the name's proper suffixes, longest first
        pos = 12
        length = data[12]
        while length:
            if length > 63:
                return None
            pos += length + 1
            suffixes.append(pos)
            length = data[pos]
        if pos >= _NAME_MAX_END:
            return None
        if pos + 1 != qend:  # a zero byte inside a label
            qend = pos + 1
            key = data[12:qend].lower()
            node = shards[hash(key) & SHARD_MASK].get(key)
        if node is None and table.partial:
            return None  # maybe a name not compiled yet: the slow path answers from the view
    if data[qend + 2] or data[qend + 3] != 1:  # class IN
        return None
    qtype = data[qend] << 8 | data[qend + 1]
    if qtype == _NXNAME:
        return None  # RFC 9824 3.5: FORMERR, from the slow path
    rest = qend + 4

    # EDNS: an OPT record of version 0 that ends the packet; ECS validated as RFC 7871 (and dnspython).
    ecs_at = 0
    ecs_end = 0
    ecs_src = 0
    do = 0
    co = 0
    co_echo = False  # a compact denial of a nonexistent name to a CO query: NXDOMAIN, CO echoed
    scope_bits = 0  # the ECS scope echoed: what the plan used, at most the source prefix
    nsid = b""
    ip = src_ip
    v6 = src_v6
    if has_opt:
        if data[rest] or data[rest + 1] or data[rest + 2] != 41 or data[rest + 6]:
            return None
        payload = data[rest + 3] << 8 | data[rest + 4]
        do = data[rest + 7] >> 7
        # RFC 9824 Compact Answers OK: it changes only signed answers (DO set) of a signed table.
        co = do and data[rest + 7] & _CO and table.signer is not None
        end = rest + 11 + (data[rest + 9] << 8 | data[rest + 10])
        if end != n:
            return None
        at = rest + 11
        while at < end:
            code = data[at] << 8 | data[at + 1]
            after = at + 4 + (data[at + 2] << 8 | data[at + 3])
            if after > end:
                return None
            if code == _ECS:
                if ecs_end:
                    return None
                family = data[at + 5]
                source = data[at + 6]
                if data[at + 4] or family not in (1, 2):
                    return None
                bits = 32 if family == 1 else 128
                if source > bits or data[at + 7] > bits or after - at - 8 != (source + 7) >> 3:
                    return None
                if source & 7 and data[after - 1] & (0xFF >> (source & 7)):
                    return None
                ecs_at = at
                ecs_end = after
                ecs_src = source
                if source and table.use_client_subnet:
                    ip = int.from_bytes(data[at + 8 : after], "big") << (bits - ((source + 7) & ~7))
                    v6 = family == 2
            elif code == _COOKIE:
                size = after - at - 4
                if size != 8 and not 16 <= size <= 40:
                    return None
            elif code == _NSID:
                nsid = table.nsid
            elif code in _STRICT_OPTIONS:
                return None
            at = after
    elif rest != n:
        return None

    # The answer.
    if do and qtype in _META_TYPES and table.signer is not None:
        return None  # NSEC, RRSIG: answered from the records at the name by the slow path (wire/metatypes.py)
    if node is not None:
        if do and table.signed_names:  # DNSSEC: the signed variants of the same entries
            signed_node = table.signed_names.get(key)
            if signed_node is not None:
                if co and _nxdomain_entry(node.types.get(qtype, node.default)):
                    return None  # all_down=nxdomain as a compact denial: the slow path writes NXDOMAIN
                node = signed_node
        pick, counter, variants, location_dependent = node.types.get(qtype, node.default)
        if location_dependent and ecs_end and table.use_client_subnet:  # the ECS scope the plan used
            scope_bits = echoed(plan_scope(getattr(pick, "__self__", None), ip, v6), ecs_src)
        if pick is None:
            heads, tc_heads, sections, options = variants[0]
        else:
            heads, tc_heads, sections, options = variants[pick(ip, v6, rng, next(counter))]
    else:
        location_dependent = False
        if qtype in _ZONE_TRANSFERS:
            heads, tc_heads, sections, options = table.refused_transfer
        else:
            heads, tc_heads, sections, options = table.refused
            zones = table.zones
            wildcards = table.wildcard_parents
            delegated = table.delegated
            for offset in suffixes:
                zone_key = key[offset - 12 :]
                if wildcards and zone_key in wildcards:
                    return None  # maybe a wildcard's answer: the slow path decides (RFC 4592)
                if delegated and zone_key in delegated:  # below a zone cut or a DNAME (answer/dname.py)
                    referral = table.referrals.get(zone_key)
                    if referral is None or (do and table.signer is not None):
                        return None  # a DNAME's synthesis, or a signed referral: the slow path
                    qname = key_name(key)
                    if "\\" in qname:
                        return None  # a label with a dot or an odd byte: its shape is not its text's
                    heads, tc_heads, sections, options = compile_answer(qname, referral)
                    break
                zone = zones.get(zone_key)
                if zone is not None:
                    options = b""
                    signed = table.signed_zones.get(zone_key) if do else None
                    if signed is not None:  # RFC 9824 compact denial, or NXDOMAIN from the NSEC chain
                        found = signed.denials.get(key)
                        if found is not None:
                            heads, tc_heads, sections = (
                                signed.heads,
                                signed.tc_heads,
                                signed.soa_at[offset] + found,
                            )
                        else:
                            heads, tc_heads, sections = signed.denial(key, offset)
                        if co and heads is signed.heads:  # compact (not from the chain): RFC 9824 4
                            heads, tc_heads = co_heads(heads), co_heads(tc_heads)
                            co_echo = True
                        break
                    heads = zone.heads
                    tc_heads = zone.tc_heads
                    sections = nx_soa(zone, key, offset, rest)
                    break

    # The response: ID, header tail, the query's question, records, OPT.
    question = data[12:rest]
    if has_opt:
        index = (data[2] & 1) | 2
        # Options in the slow path's order: ECS echo, NSID, then the variant's own (EDE).
        if ecs_end and table.use_client_subnet:
            scope = _BYTE[scope_bits]
            options = b"".join((data[ecs_at : ecs_at + 7], scope, data[ecs_at + 8 : ecs_end], nsid, options))
        elif nsid:
            options = nsid + options
        if options:
            opt = b"".join((table.opt_prefix[do], len(options).to_bytes(2, "big"), options))
        else:
            opt = table.opt_plain[do]
        if co_echo:
            opt = opt[:7] + _CO_FLAGS + opt[8:]
        limit = 512 if payload < 512 else payload
        if limit > table.max_udp_payload:
            limit = table.max_udp_payload if table.max_udp_payload > 512 else 512
    else:
        index = data[2] & 1
        opt = b""
        limit = 512
    if not tcp and rest + len(sections) + len(opt) > limit:
        head = tc_heads[index]
        return b"".join((data[:2], with_cd(head) if data[3] & _CD else head, question, opt))
    head = heads[index]
    return b"".join((data[:2], with_cd(head) if data[3] & _CD else head, question, sections, opt))


def with_cd(head: bytes) -> bytes:
    """A header tail with the CD bit set: copied from the query (RFC 4035 3.1.6), as the slow path does."""
    return head[:1] + bytes((head[1] | _CD,)) + head[2:]


# Fill steps (server/build.py) update the C copy at most this often; Python answers what it lacks.
C_LAG = 1.0


class Responder:
    """Answers query packets from the current answer table and view; `swap` replaces both at once.

    With the C extension (wire/ctable.py) the responder also keeps a C copy of the table: `handle` asks
    it first, and `slot` hands it to the C UDP loops, which answer without calling Python at all for
    what the C table knows. `native=False` (or GSLBD_NATIVE=0) answers everything in Python. The C copy
    leaves to Python what a feature in Python changes (`fallback_of`): every query while a Python guard
    is set (the C guard, wire/cguard.py, is a stage of C's answers instead), NXDOMAIN and REFUSED while
    the exchange hook is set, and every name it does not hold while the
    table is partial (names not compiled yet are answered by the slow path, from the view). Signed zones
    are answered in C too, but for what only Python does (a fresh compact denial within the budget:
    docs/wire.md)."""

    __slots__ = (
        "_c_made",
        "_exchange",
        "_guard",
        "_policy_totals",
        "_slow_seq",
        "_state",
        "_wanted",
        "cookie_secret",
        "malformed_count",
        "on_notify",
        "rng",
        "slot",
        "slow_count",
    )

    def __init__(
        self, table: AnswerTable, view: View, rng: random.Random, *, native: bool | None = None
    ) -> None:
        self.rng = rng
        self.slow_count = 0  # queries answered (or dropped) by the slow path
        self.malformed_count = 0  # messages that cannot be parsed, answered (or dropped) before it
        self._wanted: dict[bytes, None] = {}  # table keys of names asked for: see take_wanted
        self._slow_seq = itertools.count()
        self._policy_totals: dict[str, int] = {}  # answers counted by tables swapped out
        self.on_notify: NotifyHook | None = None  # answers DNS NOTIFY when set (wire/notify.py)
        # Cookies and RRL (wire/guard.py), from the view's `dns` settings; the secret is used when
        # `dns.cookies` names no secret file (the parent hands it to worker processes in their config).
        self.cookie_secret = os.urandom(16)
        self._exchange: ExchangeHook | None = None  # serves the exchange zone when set (wire/transfer.py)
        use_c = ctable.enabled() if native is None else (native and ctable.AVAILABLE)
        self.slot = ctable.new_slot() if use_c else None  # read by the C UDP loops (server/udp.py)
        # With the C table the guard is C's (a stage of its answer path), else the Python one.
        self._guard: AnyGuard | None = guard_for(view.config.dns, None, self.cookie_secret, native=use_c)
        built = self._c_copy(None, table) if use_c else None
        self._state: tuple[AnswerTable, View, CTable | None] = (table, view, built)
        self._c_made = time.monotonic()  # when the C copy was last brought up to date

    @property
    def guard(self) -> AnyGuard | None:
        """Cookies and RRL, applied to every response: with the C table the C guard (wire/cguard.py),
        the last stage of C's answers and applied to Python's by `handle`; a Python guard
        (wire/guard.py) makes the C copy answer nothing (every query goes through Python)."""
        return self._guard

    @guard.setter
    def guard(self, guard: AnyGuard | None) -> None:
        before = self._guard
        self._guard = guard
        if self.slot is not None and before is not guard:  # the C copy carries the guard it applies
            table, view, built = self._state
            self._state = (table, view, self._c_copy(built, table))

    @property
    def on_exchange(self) -> ExchangeHook | None:
        """Serves this site's exchange zone (wire/transfer.py) when set: it is asked about every query
        the tables answer NXDOMAIN or REFUSED or without answer records; it answers only those naming
        `_gslbd-exchange-*`, so the C copy leaves just those to Python while it is set (and holds no
        exchange cut, wire/ctable.py)."""
        return self._exchange

    @on_exchange.setter
    def on_exchange(self, hook: ExchangeHook | None) -> None:
        if self.slot is None or (hook is None) == (self._exchange is None):
            self._exchange = hook
            return
        table, view, built = self._state
        if hook is not None:  # the C copy steps aside before the hook is asked
            self._state = (
                table,
                view,
                self._c_copy(built, table, replace(self.fallback_of(table), negative=True)),
            )
            self._exchange = hook
        else:
            self._exchange = None
            self._state = (table, view, self._c_copy(built, table))

    def fallback_of(self, table: AnswerTable) -> Fallback:
        """What the C copy of `table` must leave to Python, given this responder's features."""
        return Fallback(
            negative=self._exchange is not None,
            misses=table.partial,
            everything=self._guard is not None and not isinstance(self._guard, NativeGuard),
        )

    def swap(self, table: AnswerTable, view: View, *, lag: bool = False) -> None:
        """Serve from a new table and view; one attribute assignment, so a query sees old or new.
        The policy counters of the old table that the new one does not share are added to the totals
        (a table updated in place of a few names shares every other entry, and its counters). The C
        copy is updated by name when only names changed (one pointer store in the slot), and continues
        the old one's counts. `lag`: `table` only adds compiled names to a partial table (a fill step,
        server/build.py): the C copy may stay as it is for up to `C_LAG` seconds (it leaves the names
        it lacks to Python, which has them); it catches up then, or at the next swap without `lag`."""
        old, _, old_c = self._state
        before = self._guard
        self._guard = guard_for(view.config.dns, before, self.cookie_secret, native=self.slot is not None)
        at = time.monotonic()
        if (
            lag
            and old_c is not None
            and table.partial
            and old.partial
            and at < self._c_made + C_LAG
            and self._guard is before
        ):
            built: CTable | None = old_c
        else:
            built = self._c_copy(old_c, table) if self.slot is not None else None
            self._c_made = at
        self._state = (table, view, built)
        if table.derived_from == old.serial:  # updated from the table served until now
            retired = count_answers(table.retired)
        else:
            now = table.policy_counters
            retired = count_answers(
                pc for key, pcs in old.policy_counters.items() if now.get(key) is not pcs for pc in pcs
            )
        for policy, count in retired.items():
            self._policy_totals[policy] = self._policy_totals.get(policy, 0) + count

    def _c_copy(
        self, old: CTable | None, table: AnswerTable, fallback: Fallback | None = None
    ) -> CTable | None:
        """The C copy of `table` (updated from `old` when there is one), handed to the UDP loops; None
        after an error (logged): then Python answers everything until a later table copies well."""
        assert self.slot is not None
        if fallback is None:
            fallback = self.fallback_of(table)
        try:
            built = (
                ctable.update_ctable(old, table, fallback)
                if old is not None
                else ctable.build_ctable(table, fallback)
            )
        except Exception:
            log.exception("cannot copy the answer table into C; answering in Python")
            built = None
        if built is not None:  # handle()'s draws in C follow this responder's rng (a UDP loop has its own)
            built.native.seed(self.rng.getrandbits(64))
            if isinstance(self._guard, NativeGuard):  # cookies and RRL: the last stage of C's answers
                built.native.set_guard(self._guard.native)
        self.slot.set(built.native if built is not None else None)
        return built

    def policy_answers(self) -> dict[str, int]:
        """Answers decided by each policy (fast paths) since this responder started."""
        out = dict(self._policy_totals)
        table, _, built = self._state
        for policy, count in table.policy_answers().items():
            out[policy] = out.get(policy, 0) + count
        if built is not None:
            for policy, count in built.policy_answers().items():
                out[policy] = out.get(policy, 0) + count
        return out

    @property
    def table(self) -> AnswerTable:
        return self._state[0]

    @property
    def view(self) -> View:
        return self._state[1]

    @property
    def native(self) -> CTable | None:
        """The C copy of the table, when answers come from C."""
        return self._state[2]

    def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None:
        """The response to one query packet (no TCP length prefix), or None to drop it."""
        table, view, built = self._state
        if built is not None:
            answered = built.native.answer(data, src_ip, src_v6, tcp)
            if answered is not None:  # guarded by C already; False: its guard dropped the answer
                return answered if isinstance(answered, bytes) else None
            built.learn(data)  # a geo client only Python places: C keeps its prefix's class from now on
        try:
            out = fast_answer(table, data, src_ip, src_v6, tcp, self.rng)
        except IndexError:
            out = None
        if out is None:  # a message whose structure breaks is answered from its bytes (wire/precheck.py)
            found = scan(data)
            if not found[0]:
                self.malformed_count += 1
                out = error_response(data, found, table.max_udp_payload)
                guard = self.guard
                return out if guard is None else guard.apply(data, out, src_ip, src_v6, tcp)
        hook = self._exchange
        if hook is not None and (out is None or out[3] & 0xF in (3, 5) or out[6:8] == _NO_ANSWERS):
            # NXDOMAIN, REFUSED, no answer records (a denial, the referral at the exchange cut of a
            # signed zone) or not taken: maybe this site's exchange zone (wire/transfer.py)
            own = hook(data, view.snapshot.evaluated_at, src_ip, src_v6, tcp)
            if own is not None:  # a transfer over TCP goes as it is (TCP is never rate limited)
                return own if tcp or self.guard is None else self.guard.apply(data, own, src_ip, src_v6, tcp)
        if out is None:
            self.slow_count += 1
            if table.partial and len(self._wanted) < WANTED_MAX:
                key = _question_key(data)  # its name is made by take_wanted, off the query path
                if key is not None:
                    self._wanted[key] = None
            out = self._slow(table, view, data, src_ip, src_v6, tcp)
        guard = self.guard
        if guard is None:
            return out
        return guard.apply(data, out, src_ip, src_v6, tcp)

    def take_wanted(self) -> list[str]:
        """The names the slow path was asked for while the table was partial (not compiled yet, or not
        in the view at all), since the last call, at most WANTED_MAX: the next fill step compiles those
        first, so the names clients ask for leave the slow path first after a large start."""
        wanted, self._wanted = self._wanted, {}
        return [key_name(key) for key in wanted]

    def guard_counts(self) -> dict[str, int]:
        """RRL and cookie counters (empty when both are off)."""
        return self.guard.counts() if self.guard is not None else {}

    def geo_cache_counts(self) -> dict[str, int]:
        """The C table's GeoIP prefix cache (wire/_geocache.c), for the process: `geo_cache_hits` (C
        answered a client only Python can place from its prefix's slot), `geo_cache_misses` (C asked
        Python), `geo_cache_fills` (Python placed one); empty without the C table."""
        if self.slot is None:
            return {}
        names = {"hit": "geo_cache_hits", "miss": "geo_cache_misses", "fill": "geo_cache_fills"}
        return {names[k]: v for k, v in ctable.geo_counts().items()}

    def _slow(
        self, table: AnswerTable, view: View, data: bytes, src_ip: int, src_v6: bool, tcp: bool
    ) -> bytes | None:
        return slow_response(
            data,
            view,
            src_ip,
            src_v6,
            tcp=tcp,
            max_udp_payload=table.max_udp_payload,
            use_client_subnet=table.use_client_subnet,
            signer=table.signer,
            signed_zones=table.signed_zones,
            rng=self.rng,
            seq=next(self._slow_seq),
            on_notify=self.on_notify,
            identity=table.identity,
            version=view.config.dns.version,
        )
