"""From (config, snapshot) to what the listeners answer from: the view and its compiled table.

Both the main process (App) and every worker process build their answers here, so they cannot differ.
An `AnswerBuilder` remembers what it built last: for a new snapshot under the same config it rebuilds
only the names whose inputs changed (answer/build.py) and recompiles only those (wire.update_table);
a new config, or the first build, compiles everything.
"""

from __future__ import annotations

from collections.abc import Collection

from gslbd.answer import Change, View, ViewBuilder
from gslbd.model.config import Config
from gslbd.policy import PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.wire import AnswerTable, compile_table, update_table


class AnswerBuilder:
    """Builds (view, table) pairs for a sequence of snapshots and configs, one process's worth."""

    def __init__(self) -> None:
        self._views = ViewBuilder()
        self._table: AnswerTable | None = None
        self.last_change = Change(True)  # what the last build changed

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
        if self._table is None or change.full:
            table = compile_table(
                view,
                max_udp_payload=config.dns.max_udp_payload,
                use_client_subnet=config.topology.use_client_subnet,
            )
        else:
            table = update_table(self._table, view, change.changed, change.removed)
        self._table = table
        return view, table


def compile_answers(config: Config, snapshot: Snapshot, env: PolicyEnv) -> tuple[View, AnswerTable]:
    """The view of `config` under `snapshot`, and the wire table compiled from it (all of it)."""
    return AnswerBuilder().build(config, snapshot, env)
