"""From (config, snapshot) to what the listeners answer from: the view and its compiled table.

Both the main process (App) and every worker process build their answers here, so they cannot differ.
An `AnswerBuilder` remembers what it built last: for a new snapshot under the same config it rebuilds
only the names whose inputs changed (answer/build.py) and recompiles only those (wire.update_table);
a new config, or the first build, compiles everything.
"""

from __future__ import annotations

from collections.abc import Collection

from gslbd.answer import Change, ServiceDiff, View, ViewBuilder
from gslbd.clock import Clock, SystemClock
from gslbd.model.config import Config
from gslbd.policy import PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.wire import AnswerTable, compile_table, update_table
from gslbd.wire.dnssec import Signer, signer_for


class AnswerBuilder:
    """Builds (view, table) pairs for a sequence of snapshots and configs, one process's worth."""

    def __init__(self, clock: Clock | None = None, signer: Signer | None = None, worker: int = 0) -> None:
        self._worker = worker  # the DNS worker's number (1..dns.workers), 0 without workers: dns.identity
        self._views = ViewBuilder()
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
            table = compile_table(
                view,
                max_udp_payload=config.dns.max_udp_payload,
                use_client_subnet=config.topology.use_client_subnet,
                signer=self.signer,
                worker=self._worker,
            )
        else:
            table = update_table(self._table, view, change.changed, change.removed)
        self._table = table
        return view, table

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


def compile_answers(config: Config, snapshot: Snapshot, env: PolicyEnv) -> tuple[View, AnswerTable]:
    """The view of `config` under `snapshot`, and the wire table compiled from it (all of it)."""
    return AnswerBuilder().build(config, snapshot, env)
