"""From (config, snapshot) to what the listeners answer from: the view and its compiled table.

Both the main process (App) and every worker process build their answers here, so they cannot differ.
"""

from __future__ import annotations

from gslbd.answer import View, build_view
from gslbd.model.config import Config
from gslbd.policy import PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.wire import AnswerTable, compile_table


def compile_answers(config: Config, snapshot: Snapshot, env: PolicyEnv) -> tuple[View, AnswerTable]:
    """The view of `config` under `snapshot`, and the wire table compiled from it."""
    view = build_view(config, snapshot, env)
    table = compile_table(
        view,
        max_udp_payload=config.dns.max_udp_payload,
        use_client_subnet=config.topology.use_client_subnet,
    )
    return view, table
