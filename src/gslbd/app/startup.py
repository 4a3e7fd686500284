"""What an App needs decided from its config before it starts: its state store, and whether this
process may run every check the config asks for."""

from __future__ import annotations

import os
from collections.abc import Mapping

from gslbd.app.reconcile import probed_endpoints
from gslbd.health.probes import check_privileges
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.store import FileStateStore, MemoryStateStore, StateStore


def store_for(config: Config) -> StateStore:
    """The state store a config asks for: its `state.file`, else memory only."""
    if config.state.file is not None:
        return server_file_store(config.state.file)
    return MemoryStateStore()


def server_file_store(path: str | os.PathLike[str]) -> FileStateStore:
    """The state file a starting server keeps its admin states in, with the temporary files of writes
    cut short by an earlier process (kill -9) removed."""
    store = FileStateStore(path)
    store.remove_stale_temps()
    return store


def privilege_problems(config: Config, probed: Mapping[EndpointKey, Endpoint] | None = None) -> list[str]:
    """Checks this process cannot run (an icmp check without the right to open an ICMP socket).
    `probed`: the config's `probed_endpoints`, when known already."""
    out: list[str] = []
    seen: set[str] = set()
    for ep in (probed if probed is not None else probed_endpoints(config)).values():
        check = ep.check
        if check is None or check.name in seen:
            continue
        seen.add(check.name)
        message = check_privileges(check)
        if message is not None:
            out.append(f"{config.source}: check {check.name!r}: {message}")
    return out
