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
import random

from gslbd.answer import View
from gslbd.wire import ctable
from gslbd.wire.compile import AnswerTable, count_answers
from gslbd.wire.ctable import CTable, Fallback
from gslbd.wire.notify import NotifyHook
from gslbd.wire.slowpath import slow_response

log = logging.getLogger(__name__)

# Header bytes 4..10 of a plain query: QDCOUNT=1, ANCOUNT=0, NSCOUNT=0.
_COUNTS = b"\x00\x01\x00\x00\x00\x00"
_AR0 = b"\x00\x00"
_AR1 = b"\x00\x01"
_NAME_MAX_END = 12 + 255
# Compression pointers to offsets inside the question, and single bytes, prebuilt.
_POINTER = tuple(bytes((0xC0 | (offset >> 8), offset & 0xFF)) for offset in range(_NAME_MAX_END + 1))
_BYTE = tuple(bytes((value,)) for value in range(256))
_LENGTH = tuple(value.to_bytes(2, "big") for value in range(64))  # an ECS option is at most 24 bytes
# EDNS options dnspython validates strictly (the fast path leaves queries carrying them to it).
_STRICT_OPTIONS = frozenset((15, 18, 22, 23, 24, 25))
_ECS = 8
_COOKIE = 10
_ZONE_TRANSFERS = (251, 252)


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
    names = table.names
    qend = data.find(0, 12) + 1
    if qend == 0:
        return None
    key = data[12:qend].lower()
    node = names.get(key)
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
            node = names.get(key)
    if data[qend + 2] or data[qend + 3] != 1:  # class IN
        return None
    qtype = data[qend] << 8 | data[qend + 1]
    rest = qend + 4

    # EDNS: an OPT record of version 0 that ends the packet; ECS validated as RFC 7871 (and dnspython).
    ecs_at = 0
    ecs_end = 0
    ecs_src = 0
    ip = src_ip
    v6 = src_v6
    if has_opt:
        if data[rest] or data[rest + 1] or data[rest + 2] != 41 or data[rest + 6]:
            return None
        payload = data[rest + 3] << 8 | data[rest + 4]
        do = data[rest + 7] >> 7
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
            elif code in _STRICT_OPTIONS:
                return None
            at = after
    elif rest != n:
        return None

    # The answer.
    if node is not None:
        pick, counter, variants, location_dependent = node.types.get(qtype, node.default)
        if pick is None:
            heads, tc_heads, sections = variants[0]
        else:
            heads, tc_heads, sections = variants[pick(ip, v6, rng, next(counter))]
    else:
        location_dependent = False
        heads, tc_heads, sections = table.refused
        if qtype not in _ZONE_TRANSFERS:
            zones = table.zones
            for offset in suffixes:
                zone = zones.get(key[offset - 12 :])
                if zone is not None:
                    heads, tc_heads, soa_tail = zone
                    sections = _POINTER[offset] + soa_tail
                    break

    # The response: ID, header tail, the query's question, records, OPT.
    question = data[12:rest]
    if has_opt:
        index = (data[2] & 1) | 2
        if ecs_end and table.use_client_subnet:
            scope = _BYTE[ecs_src] if location_dependent else _BYTE[0]
            opt = b"".join(
                (
                    table.opt_prefix[do],
                    _LENGTH[ecs_end - ecs_at],
                    data[ecs_at : ecs_at + 7],
                    scope,
                    data[ecs_at + 8 : ecs_end],
                )
            )
        else:
            opt = table.opt_plain[do]
        limit = 512 if payload < 512 else payload
        if limit > table.max_udp_payload:
            limit = table.max_udp_payload if table.max_udp_payload > 512 else 512
    else:
        index = data[2] & 1
        opt = b""
        limit = 512
    if not tcp and rest + len(sections) + len(opt) > limit:
        return b"".join((data[:2], tc_heads[index], question, opt))
    return b"".join((data[:2], heads[index], question, sections, opt))


class Responder:
    """Answers query packets from the current answer table and view; `swap` replaces both at once.

    With the C extension (wire/ctable.py) the responder also keeps a C copy of the table: `handle` asks
    it first, and `slot` hands it to the C UDP loops, which answer without calling Python at all for
    what the C table knows. `native=False` (or GSLBD_NATIVE=0) answers everything in Python."""

    __slots__ = (
        "_fallback",
        "_policy_totals",
        "_slow_seq",
        "_state",
        "on_notify",
        "rng",
        "slot",
        "slow_count",
    )

    def __init__(
        self,
        table: AnswerTable,
        view: View,
        rng: random.Random,
        *,
        native: bool | None = None,
        fallback: Fallback = ctable.NO_FALLBACK,
    ) -> None:
        use_c = ctable.enabled() if native is None else (native and ctable.AVAILABLE)
        self._fallback = fallback
        self.slot = ctable.new_slot() if use_c else None  # read by the C UDP loops (server/udp.py)
        built = self._c_copy(None, table) if use_c else None
        self._state: tuple[AnswerTable, View, CTable | None] = (table, view, built)
        self.rng = rng
        self.slow_count = 0  # queries answered (or dropped) by the slow path
        self._slow_seq = itertools.count()
        self._policy_totals: dict[str, int] = {}  # answers counted by tables swapped out
        self.on_notify: NotifyHook | None = None  # answers DNS NOTIFY when set (wire/notify.py)

    def swap(self, table: AnswerTable, view: View) -> None:
        """Serve from a new table and view; one attribute assignment, so a query sees old or new.
        The policy counters of the old table that the new one does not share are added to the totals
        (a table updated in place of a few names shares every other entry, and its counters). The C
        copy is updated by name when only names changed, and continues the old one's counts."""
        old, _, old_c = self._state
        built = self._c_copy(old_c, table) if self.slot is not None else None
        self._state = (table, view, built)
        now = table.policy_counters
        retired = count_answers(
            pc for key, pcs in old.policy_counters.items() if now.get(key) is not pcs for pc in pcs
        )
        for policy, count in retired.items():
            self._policy_totals[policy] = self._policy_totals.get(policy, 0) + count

    def _c_copy(self, old: CTable | None, table: AnswerTable) -> CTable | None:
        """The C copy of `table` (updated from `old` when there is one), handed to the UDP loops; None
        after an error (logged): then Python answers everything until a later table copies well."""
        assert self.slot is not None
        try:
            built = (
                ctable.update_ctable(old, table, self._fallback)
                if old is not None
                else ctable.build_ctable(table, self._fallback)
            )
        except Exception:
            log.exception("cannot copy the answer table into C; answering in Python")
            built = None
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
            out = built.native.answer(data, src_ip, src_v6, tcp)
            if out is not None:
                return out
        try:
            out = fast_answer(table, data, src_ip, src_v6, tcp, self.rng)
        except IndexError:
            out = None
        if out is not None:
            return out
        self.slow_count += 1
        return slow_response(
            data,
            view,
            src_ip,
            src_v6,
            tcp=tcp,
            max_udp_payload=table.max_udp_payload,
            use_client_subnet=table.use_client_subnet,
            rng=self.rng,
            seq=next(self._slow_seq),
            on_notify=self.on_notify,
        )
