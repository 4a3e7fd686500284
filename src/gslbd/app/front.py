"""What answers DNS for an App: the responder, and in-process listeners or worker processes."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from gslbd.app.generation import Generation
from gslbd.model.config import Config
from gslbd.server.dnstap import DnstapSink, with_dnstap
from gslbd.server.listeners import Listeners
from gslbd.server.stats import ServerStats
from gslbd.server.workers import WorkerPool
from gslbd.wire import Responder

log = logging.getLogger(__name__)


class DnsFront:
    """With `dns.workers: 1` the listeners run on this process's event loop and answer with `responder`;
    with more, worker processes bind the addresses and get every change over their pipes."""

    def __init__(self, responder: Responder, worker_log_level: int) -> None:
        self.responder = responder
        self.stats = ServerStats()  # the in-process listeners' counters
        self._worker_log_level = worker_log_level
        self.listeners: Listeners | None = None
        self.workers: WorkerPool | None = None
        self._worker_config: tuple[Config, Config] | None = None  # (config, with the cookie secret)
        self.dnstap: DnstapSink | None = None  # the query log's writer, with dnstap on and no workers

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

    async def bind(self, generation: Generation) -> None:
        """Bind every listen address, here or in the workers. On failure nothing stays open."""
        dns = generation.config.dns
        if dns.workers > 1:
            pool = WorkerPool(dns.workers, self._worker_log_level)
            await pool.start(
                self._for_workers(generation.config), generation.snapshot, generation.resolved.env
            )
            self.workers = pool
            log.info("DNS answered by %d worker processes on %s", dns.workers, ", ".join(pool.bound))
            return
        # With log.dnstap the listeners answer through a wrapper that queues each exchange for the
        # dnstap writer (the C UDP loop answers with the responder inside it and writes into the
        # writer's C ring itself); without it they call the responder itself (no per-query cost).
        handler, sink = with_dnstap(self.responder, generation.config, self.stats)
        listeners = Listeners(
            dns.listen,
            handler,
            tcp_idle_timeout=dns.tcp_idle_timeout,
            stats=self.stats,
            tcp_backlog=dns.tcp_backlog,
            threads=dns.threads,
        )
        try:
            await listeners.start()
        except BaseException:
            if sink is not None:
                await asyncio.to_thread(sink.stop)
            raise
        self.listeners = listeners
        self.dnstap = sink

    def publish(self, generation: Generation) -> None:
        """Answer from a committed generation here, and send the workers what changed: the whole
        config when it is new (only the changed services when nothing else changed), else the
        verdicts, overrides and learned endpoints of the services the generation changed."""
        self.responder.swap(generation.table, generation.view)
        if self.workers is not None:
            self.workers.publish(
                self._for_workers(generation.config),
                generation.snapshot,
                generation.changed,
                generation.resolved.services,
                generation.resolved.env,
            )

    def _for_workers(self, config: Config) -> Config:
        """The config with this process's random cookie secret filled in (when `dns.cookies` names no
        secret file), so that every worker makes and accepts the same server cookies. The same object
        for the same config: the workers are sent a config only when it is new."""
        cookies = config.dns.cookies
        if cookies is None or cookies.secret is not None:
            return config
        made = self._worker_config
        if made is not None and made[0] is config:
            return made[1]
        secret = self.responder.cookie_secret
        filled = replace(config, dns=replace(config.dns, cookies=replace(cookies, secret=secret)))
        self._worker_config = (config, filled)
        return filled

    async def close(self) -> None:
        """Close every socket, and stop the workers."""
        listeners, self.listeners = self.listeners, None
        workers, self.workers = self.workers, None
        sink, self.dnstap = self.dnstap, None
        if listeners is not None:
            await listeners.close()
        if sink is not None:  # after the listeners: every answered query is in its queue
            await asyncio.to_thread(sink.stop)
        if workers is not None:
            await workers.stop()
