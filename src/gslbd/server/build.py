"""From (config, snapshot) to what the listeners answer from: the view and its compiled table.

Both the main process (App) and every worker process build their answers here, so they cannot differ.
An `AnswerBuilder` remembers what it built last: for a new snapshot under the same config it rebuilds
only the names whose inputs changed (answer/build.py) and recompiles only those (wire.update_table);
a new config, or the first build, compiles everything.

A large view is compiled in steps: the first build of an unsigned view with more than `EAGER_NAMES`
names compiles the names services do not own (apexes, static records, heartbeats, empty
non-terminals) and leaves the services' names for later; its table is `partial`, and the fast path
(Python and C) leaves every name it does not find to the slow path, which answers from the view. The
owner then calls `fill` between other work (the event loop's turns): each call compiles the next
names for a slice of time and returns the table with them, until none is left. Answers are the same
either way; only their cost differs, so the first answer at 100,000 services does not wait for
hundreds of thousands of names to be compiled.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Collection, Iterator
from dataclasses import replace

from gslbd.answer import Change, ServiceDiff, View, ViewBuilder
from gslbd.clock import Clock, SystemClock
from gslbd.cow import MASK as SHARD_MASK
from gslbd.gcpause import collector_paused
from gslbd.model.config import Config
from gslbd.policy import PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.wire import AnswerTable, compile_table, update_table, wire_key
from gslbd.wire.dnssec import Signer, signer_for

# Views with more names than this are compiled in steps (see above); smaller ones whole.
EAGER_NAMES = 20_000
# How long one `fill` call compiles: the owner's event loop is busy that long per turn.
FILL_SECONDS = 0.02
# Names compiled between two looks at the clock in `fill`.
_FILL_BATCH = 64


class AnswerBuilder:
    """Builds (view, table) pairs for a sequence of snapshots and configs, one process's worth."""

    def __init__(
        self,
        clock: Clock | None = None,
        signer: Signer | None = None,
        worker: int = 0,
        eager_names: int = EAGER_NAMES,
    ) -> None:
        self._eager_names = eager_names
        self._pending: list[str] = []  # names `fill` still has to compile, taken from the end
        self._grouped = True  # whether `_pending` is in shard order
        self._filled: tuple[str, ...] = ()  # the deferred services the last `fill` built
        self._service_cost = 0.0005  # seconds to build and compile one deferred service (measured)
        self._view: View | None = None
        self._worker = worker  # the DNS worker's number (1..dns.workers), 0 without workers: dns.identity
        # Past `eager_names` names the view itself is built in steps too: the first build makes a
        # hundredth of that many services' names, the slow path makes any other one when it is asked for,
        # and `fill` builds the rest (answer/build.py Deferred).
        self._views = ViewBuilder(eager_services=max(1, eager_names // 100), defer_over=eager_names // 2)
        self._table: AnswerTable | None = None
        self.last_change = Change(True)  # what the last build changed
        self._clock = clock or SystemClock()
        self._config: Config | None = None
        # DNSSEC (wire/dnssec.py): keeps signatures across builds. `signer`: a previous builder's, whose
        # cached signatures the first build reuses (it is not modified: a new config gets a new signer).
        self.signer: Signer | None = signer
        self._resign = False

    @property
    def empty(self) -> bool:
        """Whether nothing was built yet (the next build compiles everything)."""
        return self._table is None

    @property
    def last_full(self) -> bool:
        """Whether the last build compiled everything."""
        return self.last_change.full

    def build(
        self, config: Config, snapshot: Snapshot, env: PolicyEnv, touched: Collection[str] | None = None
    ) -> tuple[View, AnswerTable]:
        """The view of `config` under `snapshot` and its table. Earlier results are never modified.
        `touched`: the services whose inputs may have changed since the last build (None: any)."""
        view, change = self._views.build(config, snapshot, env, touched)
        if self._table is None:
            change = Change(True)
        self.last_change = change
        if config is not self._config:
            self._config = config
            zones = [(z.origin, z.dnssec) for z in config.zones]
            self.signer = signer_for(zones, self.signer, self._clock.wall)
        # Signatures near expiry: compile every name (the view's change stays what it is); the signer
        # signs anew the RRsets whose signatures it dropped and reuses all others.
        resign = self._resign or self.resign_due()
        self._resign = False
        if self._table is None or change.full or resign:
            deferred: Collection[str] = ()
            if self.signer is None and len(view.names) > self._eager_names:
                deferred = dict.fromkeys(self._views.service_owned())
            table = compile_table(
                view,
                max_udp_payload=config.dns.max_udp_payload,
                use_client_subnet=config.topology.use_client_subnet,
                signer=self.signer,
                worker=self._worker,
                defer=deferred,
            )
            if view.deferred is not None and not table.partial:
                table = replace(table, partial=True)  # the deferred services' names are not in it
            self._pending = list(deferred)
            self._grouped = False  # `fill` puts them in shard order first
        else:
            table = update_table(self._table, view, change.changed, change.removed)
        self._table = table
        self._view = view
        return view, table

    @property
    def filled(self) -> tuple[str, ...]:
        """The deferred services the last `fill` built into the view (answer/build.py Deferred)."""
        return self._filled

    @property
    def view(self) -> View | None:
        """The view of the last table built or filled (None: nothing yet)."""
        return self._view

    @property
    def table(self) -> AnswerTable | None:
        """The last table built (None: nothing yet)."""
        return self._table

    @property
    def pending(self) -> int:
        """How many names `fill` may still build or compile (0 when the last table is whole): a
        deferred service counts as one."""
        return len(self._pending) + self._views.deferred if self.filling else 0

    @property
    def filling(self) -> bool:
        """Whether the last table is partial: `fill` has names to compile."""
        return self._table is not None and self._table.partial

    def fill(
        self, seconds: float, most: int | None = None, wanted: Collection[str] = ()
    ) -> AnswerTable | None:
        """Compile names the last table left out, for about `seconds` (at least one batch), and return
        the table with them (partial until every name is in); None when nothing is left to compile.
        Names that a build compiled in the meantime, or that are no longer in the view, are skipped.
        `most`: compile at most that many names (or build that many deferred services). `wanted`: names
        clients asked for (Responder.take_wanted), compiled first (their services built first) within
        the same budget; names of the view only, others are ignored."""
        table, view = self._table, self._view
        if table is None or view is None or not table.partial:
            return None
        if view.deferred is not None:  # first the view's deferred services, compiled as they are made
            # As many services as fit in `seconds` at the cost per service the last steps measured
            # (building a service's names is the smaller part; compiling them the larger).
            count = max(1, int(seconds / self._service_cost))
            began = time.perf_counter()
            with collector_paused():
                made = self._views.fill(count if most is None else min(count, most), first=wanted)
                self._filled = self._views.filled
                view = self._views.view
                assert view is not None
                # Asked-for names of the view not compiled yet (a service built before): as many as
                # services fit in the step.
                asked = [n for n in _uncompiled(wanted, view, table) if n not in made]
                table = update_table(table, view, [*made, *asked[:count]], (), partial=True)
            built = len(self._views.filled)
            if built:
                spent = (time.perf_counter() - began) / built
                self._service_cost = max(1e-6, (self._service_cost + spent) / 2)
            if view.deferred is None and not self._pending:
                table = replace(table, partial=False)
            self._table, self._view = table, view
            return table
        self._filled = ()
        if not self._grouped:
            # By the CowMap shard of their keys: a step then touches a shard or two, and the new table
            # copies only those (in config order, a step of 100 names would copy most of 256 shards).
            self._pending.sort(key=lambda name: hash(wire_key(name)) & SHARD_MASK, reverse=True)
            self._grouped = True
        with collector_paused():  # every node made here lives on
            next_names = self._next_names(view, table, seconds, most, wanted)
            table = update_table(table, view, next_names, (), partial=True)
        if not self._pending:
            table = replace(table, partial=False)  # the same serial: still derived from the table before
        self._table = table
        return table

    def _next_names(
        self, view: View, table: AnswerTable, seconds: float, most: int | None, wanted: Collection[str]
    ) -> Iterator[str]:
        """Names to compile, the `wanted` ones first, then pending ones, until about `seconds` have
        passed (at least one batch)."""
        pending, names, known = self._pending, view.names, table.names
        deadline = time.perf_counter() + seconds
        first = _uncompiled(wanted, view, table)  # popped from `pending` later, and skipped then
        done = set(first)

        def popped() -> Iterator[str]:  # a name is taken from `pending` only when it is wanted next
            while pending:
                name = pending.pop()
                if name in names and wire_key(name) not in known and name not in done:
                    yield name

        for count, name in enumerate(itertools.chain(first, popped()), 1):
            yield name
            if count == most or (count % _FILL_BATCH == 0 and time.perf_counter() >= deadline):
                return

    def rebase(self, config: Config, env: PolicyEnv, services: ServiceDiff) -> bool:
        """Take `config`, which differs from the last build's only in `services`, without compiling
        everything: the next `build` (given `touched=services.touched`) recompiles the names of the
        changed, added and removed services alone. False when a full build is needed."""
        if self._table is None or not self._views.rebase(config, env, services):
            return False
        self._config = config
        return True

    def resign_at(self) -> float | None:
        """Wall time when cached signatures need to be made anew (None: nothing is signed)."""
        return self.signer.next_refresh() if self.signer is not None else None

    def resign_due(self) -> bool:
        """Whether some signature needs refreshing now; when it does, the next `build` compiles every
        name (a full compilation; the signer re-signs only RRsets whose signatures are due). `build`
        checks this itself: a control-plane timer only needs to call `build` at `resign_at()`."""
        at = self.resign_at()
        if at is None or self.signer is None or at > self._clock.wall():
            return False
        self.signer.forget_due(self._clock.wall())
        self._resign = True
        return True


def _uncompiled(names: Collection[str], view: View, table: AnswerTable) -> list[str]:
    """The names of `names` that the view has and the table has not compiled."""
    have, known = view.names, table.names
    return [name for name in names if name in have and wire_key(name) not in known]


def compile_answers(config: Config, snapshot: Snapshot, env: PolicyEnv) -> tuple[View, AnswerTable]:
    """The view of `config` under `snapshot`, and the wire table compiled from it (all of it)."""
    return AnswerBuilder().build(config, snapshot, env)
