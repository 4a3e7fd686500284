"""From (config, snapshot) to what the listeners answer from: the view and its compiled table.

Both the main process (App) and every worker process build their answers here, so they cannot differ.
An `AnswerBuilder` remembers what it built last: for a new snapshot under the same config it rebuilds
only the names whose inputs changed (answer/build.py) and recompiles only those (wire.update_table);
a new config, or the first build, compiles everything.
"""

from __future__ import annotations

from gslbd.answer import Change, View, ViewBuilder
from gslbd.clock import Clock, SystemClock
from gslbd.model.config import Config
from gslbd.policy import PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.wire import AnswerTable, compile_table, update_table
from gslbd.wire.dnssec import Signer, signer_for


class AnswerBuilder:
    """Builds (view, table) pairs for a sequence of snapshots and configs, one process's worth."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._views = ViewBuilder()
        self._table: AnswerTable | None = None
        self.last_change = Change(True)  # what the last build changed
        self._clock = clock or SystemClock()
        self._config: Config | None = None
        self.signer: Signer | None = None  # DNSSEC: keeps signatures across builds (wire/dnssec.py)
        self._resign = False

    @property
    def last_full(self) -> bool:
        """Whether the last build compiled everything."""
        return self.last_change.full

    def build(self, config: Config, snapshot: Snapshot, env: PolicyEnv) -> tuple[View, AnswerTable]:
        """The view of `config` under `snapshot` and its table. Earlier results are never modified."""
        view, change = self._views.build(config, snapshot, env)
        if self._table is None:
            change = Change(True)
        self.last_change = change
        if config is not self._config:
            self._config = config
            zones = [(z.origin, z.dnssec) for z in config.zones]
            self.signer = signer_for(zones, self.signer, self._clock.wall)
        if self._resign or self.resign_due():  # signatures near expiry: compile everything, the
            self._resign = False  # signer signs anew the RRsets whose signatures it dropped
            change = Change(True)
            self.last_change = change
        if self._table is None or change.full:
            table = compile_table(
                view,
                max_udp_payload=config.dns.max_udp_payload,
                use_client_subnet=config.topology.use_client_subnet,
                signer=self.signer,
            )
        else:
            table = update_table(self._table, view, change.changed, change.removed)
        self._table = table
        return view, table

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
