"""The composition root: builds everything a running gslbd needs from one Config, in order.

    App(config, clock, rng)
      env       = policy.locate.build_env(config, rng)     where clients are, known sites
      snapshot  = Snapshot(...)                            health; admin states come from the config
      view      = answer.build_view(config, snapshot, env) every decided answer
      table     = wire.compile_table(view, ...)            the fast path's wire bytes
      responder = wire.Responder(table, view, rng)         what the listeners call per message
    await start()  binds UDP+TCP on every dns.listen address (in this process, or in dns.workers
                   worker processes that get every new config and snapshot over a pipe)
    apply_snapshot(snapshot) / reload(config)  rebuild view+table and swap them in whole
    await stop()   closes the listeners (or stops the workers)

Logging is configured by the CLI, not here.
"""

from __future__ import annotations

import logging
import random

from gslbd.answer import View
from gslbd.clock import Clock, SystemClock
from gslbd.model.config import Config
from gslbd.policy import PolicyEnv
from gslbd.policy.locate import build_env
from gslbd.server.build import compile_answers
from gslbd.server.listeners import Listeners
from gslbd.server.stats import ServerStats
from gslbd.server.workers import WorkerPool
from gslbd.state.snapshot import Snapshot
from gslbd.wire import AnswerTable, Responder

log = logging.getLogger(__name__)


class App:
    """One gslbd instance. Building it validates nothing more than the config did; `start` binds."""

    def __init__(
        self,
        config: Config,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        *,
        worker_log_level: int = logging.WARNING,
    ) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.rng = rng if rng is not None else random.Random()
        self._worker_log_level = worker_log_level
        self._config = config
        self._snapshot = Snapshot(version=1)
        self._env = build_env(config, self.rng)
        self._view, self._table = compile_answers(config, self._snapshot, self._env)
        self._responder = Responder(self._table, self._view, random.Random(self.rng.getrandbits(64)))
        self._listeners: Listeners | None = None
        self._workers: WorkerPool | None = None
        self.stats = ServerStats()

    @property
    def config(self) -> Config:
        return self._config

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def env(self) -> PolicyEnv:
        return self._env

    @property
    def view(self) -> View:
        return self._view

    @property
    def table(self) -> AnswerTable:
        return self._table

    @property
    def responder(self) -> Responder:
        return self._responder

    @property
    def workers(self) -> WorkerPool | None:
        return self._workers

    @property
    def running(self) -> bool:
        return self._listeners is not None or self._workers is not None

    @property
    def bound(self) -> list[str]:
        """What is listening, as "udp://127.0.0.1:5353" strings (the workers' when there are workers)."""
        if self._listeners is not None:
            return [str(b) for b in self._listeners.bound]
        if self._workers is not None:
            return list(self._workers.bound)
        return []

    async def start(self) -> None:
        """Bind UDP and TCP on every listen address and start answering. OSError/WorkerError when a
        socket cannot be bound; then nothing is left listening."""
        if self.running:
            return
        dns = self._config.dns
        if dns.workers > 1:
            pool = WorkerPool(dns.workers, self._worker_log_level)
            await pool.start(self._config, self._snapshot)
            self._workers = pool
            log.info("DNS answered by %d worker processes on %s", dns.workers, ", ".join(pool.bound))
            return
        listeners = Listeners(
            dns.listen, self._responder, tcp_idle_timeout=dns.tcp_idle_timeout, stats=self.stats
        )
        await listeners.start()
        self._listeners = listeners

    async def stop(self) -> None:
        """Stop answering and close every socket (and worker)."""
        listeners, self._listeners = self._listeners, None
        workers, self._workers = self._workers, None
        if listeners is not None:
            await listeners.close()
        if workers is not None:
            await workers.stop()

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        """Answer from `snapshot` from now on: rebuild view and table and swap them in whole."""
        view, table = compile_answers(self._config, snapshot, self._env)
        self._snapshot, self._view, self._table = snapshot, view, table
        self._responder.swap(table, view)
        if self._workers is not None:
            self._workers.publish(self._config, snapshot)

    def reload(self, config: Config) -> None:
        """Answer from a new config from now on (health and admin overrides are kept). Listen addresses
        and the number of workers only change with a restart."""
        old = self._config.dns
        if self.running and (config.dns.listen != old.listen or config.dns.workers != old.workers):
            log.warning("dns.listen and dns.workers changes take effect at the next restart")
        env = build_env(config, self.rng)
        view, table = compile_answers(config, self._snapshot, env)
        self._config, self._env, self._view, self._table = config, env, view, table
        self._responder.swap(table, view)
        if self._workers is not None:
            self._workers.publish(config, self._snapshot)
