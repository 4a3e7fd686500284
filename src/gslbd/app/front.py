"""What answers DNS for an App: the responder, and in-process listeners or worker processes."""

from __future__ import annotations

import logging
from dataclasses import replace

from gslbd.answer import View
from gslbd.model.config import Config
from gslbd.server.listeners import Listeners
from gslbd.server.stats import ServerStats
from gslbd.server.workers import WorkerPool
from gslbd.state.snapshot import Snapshot
from gslbd.wire import AnswerTable, Responder

log = logging.getLogger(__name__)


class DnsFront:
    """With `dns.workers: 1` the listeners run on this process's event loop and answer with `responder`;
    with more, worker processes bind the addresses and get every (config, snapshot) over their pipes."""

    def __init__(self, responder: Responder, worker_log_level: int) -> None:
        self.responder = responder
        self.stats = ServerStats()  # the in-process listeners' counters
        self._worker_log_level = worker_log_level
        self.listeners: Listeners | None = None
        self.workers: WorkerPool | None = None

    @property
    def running(self) -> bool:
        return self.listeners is not None or self.workers is not None

    @property
    def bound(self) -> list[str]:
        """What is listening, as "udp://127.0.0.1:5353" strings (the workers' when there are workers)."""
        if self.listeners is not None:
            return [str(b) for b in self.listeners.bound]
        if self.workers is not None:
            return list(self.workers.bound)
        return []

    async def bind(self, config: Config, snapshot: Snapshot) -> None:
        """Bind every listen address, here or in the workers. On failure nothing stays open."""
        dns = config.dns
        if dns.workers > 1:
            pool = WorkerPool(dns.workers, self._worker_log_level)
            await pool.start(self._for_workers(config), snapshot)
            self.workers = pool
            log.info("DNS answered by %d worker processes on %s", dns.workers, ", ".join(pool.bound))
            return
        listeners = Listeners(
            dns.listen,
            self.responder,
            tcp_idle_timeout=dns.tcp_idle_timeout,
            stats=self.stats,
            tcp_backlog=dns.tcp_backlog,
        )
        await listeners.start()
        self.listeners = listeners

    def publish(self, config: Config, snapshot: Snapshot, view: View, table: AnswerTable) -> None:
        """Answer from a new view and table here, and send (config, snapshot) to the workers."""
        self.responder.swap(table, view)
        if self.workers is not None:
            self.workers.publish(self._for_workers(config), snapshot)

    def _for_workers(self, config: Config) -> Config:
        """The config with this process's random cookie secret filled in (when `dns.cookies` names no
        secret file), so that every worker makes and accepts the same server cookies."""
        cookies = config.dns.cookies
        if cookies is None or cookies.secret is not None:
            return config
        secret = self.responder.cookie_secret
        return replace(config, dns=replace(config.dns, cookies=replace(cookies, secret=secret)))

    async def close(self) -> None:
        """Close every socket, and stop the workers."""
        listeners, self.listeners = self.listeners, None
        workers, self.workers = self.workers, None
        if listeners is not None:
            await listeners.close()
        if workers is not None:
            await workers.stop()
