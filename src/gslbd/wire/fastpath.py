"""The query path: `Responder`, the one entry point the server calls for a query packet.

`Responder.handle` asks the C table first (wire/ctable.py, wire/_cfast.c), which answers the common
shapes of query from precompiled bytes; what it leaves (or everything, where the C extension is not
built) is answered by the dnspython slow path (wire/slowpath.py), which has the complete behaviour and
is the oracle the C table is held to byte for byte. Before the slow path: a message whose structure
breaks is answered from its bytes (wire/precheck.py), and the exchange hook is asked about this site's
exchange zone (wire/transfer.py). Cookies and RRL (the guard) apply to every response.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import time
from dataclasses import replace

from gslbd.answer import View
from gslbd.wire import ctable
from gslbd.wire.cguard import NativeGuard
from gslbd.wire.compile import AnswerTable, count_answers, key_name
from gslbd.wire.ctable import CTable, Fallback
from gslbd.wire.guard import AnyGuard, guard_for
from gslbd.wire.notify import NotifyHook
from gslbd.wire.precheck import Scan, error_response, scan
from gslbd.wire.slowpath import slow_response
from gslbd.wire.transfer import ExchangeHook

log = logging.getLogger(__name__)

# Names the slow path answered while the table was partial, kept for the next fill step to compile first
# (server/build.py): at most this many between two steps.
WANTED_MAX = 4096
_IN = b"\x00\x01"
_NXNAME = b"\x00\x80"  # RFC 9824's meta-type: FORMERR


# Fill steps (server/build.py) update the C copy at most this often; Python answers what it lacks.
C_LAG = 1.0


class Responder:
    """Answers query packets from the current answer table and view; `swap` replaces both at once.

    With the C extension (wire/ctable.py) the responder keeps a C copy of the table: `handle` asks it
    first, and `slot` hands it to the C UDP loops, which answer without calling Python at all for what
    the C table knows; the rest goes to the dnspython slow path. `native=False` (or GSLBD_NATIVE=0)
    answers everything with the slow path. The C copy leaves to Python what a feature in Python
    changes (`fallback_of`): every query while a Python guard is set (the C guard, wire/cguard.py, is a
    stage of C's answers instead), negative answers naming an exchange zone while the exchange hook is
    set, and every name it does not hold while the table is partial (names not compiled yet are
    answered by the slow path, from the view). Signed zones are answered in C too, but for what only
    Python does (a fresh compact denial within the budget: docs/wire.md)."""

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
        guard = self.guard
        found = scan(data)
        if not found[0]:  # a message whose structure breaks is answered from its bytes (wire/precheck.py)
            self.malformed_count += 1
            out = error_response(data, found, table.max_udp_payload)
            return out if guard is None else guard.apply(data, out, src_ip, src_v6, tcp)
        hook = self._exchange
        if hook is not None:  # maybe this site's exchange zone (wire/transfer.py)
            own = hook(data, view.snapshot.evaluated_at, src_ip, src_v6, tcp)
            if own is not None:  # a transfer over TCP goes as it is (TCP is never rate limited)
                return own if tcp or guard is None else guard.apply(data, own, src_ip, src_v6, tcp)
        self.slow_count += 1
        out = slow_answer(
            table,
            view,
            data,
            src_ip,
            src_v6,
            tcp,
            rng=self.rng,
            seq=self._policy_seq(table, data, found),
            on_notify=self.on_notify,
        )
        return out if guard is None else guard.apply(data, out, src_ip, src_v6, tcp)

    def _policy_seq(self, table: AnswerTable, data: bytes, found: Scan) -> int:
        """The `seq` of the policy's choice: the next count of the table entry that answers the question,
        as C counts per entry (so a rotation turns per name and type, and the answer is counted per
        policy); the responder's own sequence for a question the table does not answer (another opcode,
        class or EDNS version, no entry). A name the partial table has not compiled yet is kept for the
        next fill step (take_wanted)."""
        question, opt = found[1], found[2]
        if not question or data[2] & 0x78 or (opt is not None and opt[1] & 0xFF0000):
            return next(self._slow_seq)
        key = question[:-4].lower()
        node = table.names.get(key)
        if node is None:
            if table.partial and len(self._wanted) < WANTED_MAX:
                self._wanted[key] = None  # its name is made by take_wanted, off the query path
        elif question[-2:] == _IN and question[-4:-2] != _NXNAME:
            entry = node.types.get(question[-4] << 8 | question[-3], node.default)
            if entry.pick is not None:
                return next(entry.counter)
        return next(self._slow_seq)

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


def slow_answer(
    table: AnswerTable,
    view: View,
    data: bytes,
    src_ip: int,
    src_v6: bool,
    tcp: bool,
    *,
    rng: random.Random,
    seq: int,
    on_notify: NotifyHook | None = None,
) -> bytes | None:
    """The slow path's response to a query packet with the settings of `table` (payload limit, ECS,
    signer, NSID), as `Responder.handle` answers what C leaves: the oracle the C table is held to byte
    for byte for the same choice (the policy's `seq` and `rng`'s draws; C's are its own counters and
    draws, or the ones its `answer` is given)."""
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
        rng=rng,
        seq=seq,
        on_notify=on_notify,
        identity=table.identity,
        version=view.config.dns.version,
    )
