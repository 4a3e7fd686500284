"""The periodic audit (`audit: {every: 60s, sample: 100}`): the check `gslbd audit` makes, run inside the
server as an asyncio task (every query through dns.asyncquery: the event loop is never blocked), with
its result as gslbd_audit_divergent_services{peer} and gslbd_audit_runs_total. The config is read at
every run, so a reload that changes or removes `audit` or the peers takes effect at the next one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable

from gslbd.audit.ask import run_audit, settle_time
from gslbd.metrics import AUDIT_DIVERGENT, AUDIT_RUNS
from gslbd.model.config import Config

log = logging.getLogger(__name__)

IDLE = 60.0  # seconds between looks at the config while `audit` is absent


class AuditTask:
    def __init__(self, config_of: Callable[[], Config], rng: random.Random) -> None:
        self._config_of = config_of
        self._rng = rng
        self._task: asyncio.Task[None] | None = None
        self._peers: set[str] = set()  # the label values set, so peers that left are removed

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="gslbd-audit")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._publish({})

    async def _loop(self) -> None:
        while True:
            audit = self._config_of().audit
            await asyncio.sleep(audit.every if audit is not None else IDLE)
            try:
                await self.run_once()
            except Exception:  # an audit that failed says nothing about the answers; the next one runs
                log.exception("audit run failed")

    async def run_once(self) -> None:
        """One run, when the config has `audit`: sets the gauges and counts the run."""
        config = self._config_of()
        if config.audit is None:
            self._publish({})
            return
        timeout = config.peers.timeout if config.peers is not None else 1.0
        result = await run_audit(
            config, sample=config.audit.sample, rng=self._rng, timeout=timeout, settle=settle_time(config)
        )
        per_peer = result.per_peer()
        self._publish(per_peer)
        AUDIT_RUNS.inc()
        if any(per_peer.values()):
            log.warning(
                "audit: services answered differently by %s",
                ", ".join(f"{peer} ({n})" for peer, n in sorted(per_peer.items()) if n),
            )

    def _publish(self, per_peer: dict[str, int]) -> None:
        for gone in self._peers - per_peer.keys():
            AUDIT_DIVERGENT.remove(gone)
        for peer, count in per_peer.items():
            AUDIT_DIVERGENT.labels(peer=peer).set(count)
        self._peers = set(per_peer)
