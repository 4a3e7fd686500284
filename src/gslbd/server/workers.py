"""`dns.workers > 1`: worker processes that share the listen addresses with SO_REUSEPORT.

The parent (the control plane) starts N workers. Each binds every listen address itself (UDP and TCP),
so the kernel spreads queries over them, and answers from its own view and table. The parent sends
what changed over a pipe, pickled once for all workers: a new config with the whole snapshot, or for a
snapshot change only the verdicts, overrides and learned endpoints of the services it changed (a
`_Delta`); a worker rebuilds the policy environment (only when the config changed) and the names of the
services the change touched, and swaps its responder. A worker
exits when its pipe reaches end of file, which also happens when the parent dies, however it dies.
A worker that dies is restarted by the parent with the latest config and snapshot.

Workers are started with the "spawn" method (a fresh interpreter), never a bare fork of the running
event loop: a forked child would share the parent's epoll instance and every pipe end opened before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import pickle
import random
import signal
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import MappingProxyType
from typing import Any

from gslbd.answer import ServiceDiff, diff_services, same_but_services
from gslbd.cow import CowMap, cow
from gslbd.errors import GslbdError
from gslbd.exchange.notify import notify_accepted, notify_sources
from gslbd.gcpause import keep_long_lived
from gslbd.metrics import WORKER_UPDATES
from gslbd.model.config import Config
from gslbd.model.service import EndpointKey, Service
from gslbd.policy.locate import build_env
from gslbd.server.build import FILL_SECONDS, AnswerBuilder
from gslbd.server.dnstap import with_dnstap
from gslbd.server.listeners import Listeners
from gslbd.server.logsetup import active_format, setup_logging
from gslbd.server.privileges import drop_privileges
from gslbd.server.stats import CounterReport, ServerStats
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState
from gslbd.wire import Responder

log = logging.getLogger(__name__)

READY_TIMEOUT = 60.0  # seconds a worker may take to import, build its table and bind
STOP_TIMEOUT = 5.0
WATCH_INTERVAL = 1.0
COUNTERS_INTERVAL = 1.0  # seconds between a worker's counter reports (what /metrics of the parent shows)


class WorkerError(GslbdError):
    """A worker process could not start (it could not bind, or it died on the way)."""


@dataclass(frozen=True, slots=True)
class _Full:
    """A new config and the whole snapshot (CowMaps and mapping proxies travel as plain dicts)."""

    config: Config
    version: int
    health: dict[Any, bool]
    admin: dict[Any, Any]
    peer_endpoints: dict[str, Any]
    evaluated_at: float = 0.0
    # What the delays and health-driven TTLs are built from (answer/delays.py, answer/ttl.py): the
    # holds, the time the snapshot was taken, the statuses of the endpoints of services with ttl_range.
    holds: dict[str, Any] = field(default_factory=dict)
    taken_at: float = 0.0
    statuses: dict[Any, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Delta:
    """A snapshot change: the entries of the `touched` services (None values: the entry is gone) and
    the heartbeat time; with `services` set, also a config that differs from the worker's only in
    services (a services_file reload): the changed and `added` ones, the `removed` names, and when
    some were added or removed how the names in config order change (`order`: the worker's names
    [start:stop] become `names`; None: the order stays)."""

    version: int
    evaluated_at: float
    health: dict[Any, bool | None]
    admin: dict[Any, Any]
    peer_endpoints: dict[str, Any]
    touched: tuple[str, ...]
    services: dict[str, Service] | None = None
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    order: tuple[int, int, tuple[str, ...]] | None = None
    holds: dict[str, Any] = field(default_factory=dict)  # per touched service (None: no hold any more)
    taken_at: float = 0.0
    statuses: dict[Any, Any] = field(default_factory=dict)  # of the touched services with ttl_range


def _ttl_statuses(services: Iterable[Service | None], snapshot: Snapshot) -> dict[Any, Any]:
    """The statuses a worker needs to compute the health-driven TTLs of `services` as the parent did."""
    statuses = snapshot.statuses
    return {
        ep.key: statuses[ep.key]
        for service in services
        if service is not None and service.ttl_range is not None
        for ep in service.endpoints
        if ep.key in statuses
    }


def _pack_full(config: Config, snapshot: Snapshot) -> bytes:
    update = _Full(
        config,
        snapshot.version,
        dict(snapshot.health),
        dict(snapshot.admin),
        dict(snapshot.peer_endpoints),
        snapshot.evaluated_at,
        dict(snapshot.holds),
        snapshot.taken_at,
        _ttl_statuses(config.services, snapshot),
    )
    return pickle.dumps(update, protocol=pickle.HIGHEST_PROTOCOL)


def _pack_delta(
    services: Mapping[str, Service],
    snapshot: Snapshot,
    touched: Collection[str],
    change: tuple[ServiceDiff, Splice | None] | None = None,
) -> bytes:
    """The entries of the `touched` services (`services`: the config's by name); with `change`, the
    services that differ from the worker's config: the diff, and how the order changed (None: it
    did not)."""
    health: dict[Any, bool | None] = {}
    admin: dict[Any, Any] = {}
    peers: dict[str, Any] = {}
    for name in touched:
        service = services.get(name)
        learned = snapshot.peer_endpoints.get(name)
        peers[name] = learned
        endpoints = (*(service.endpoints if service is not None else ()), *(learned or ()))
        for ep in endpoints:
            health[ep.key] = snapshot.health.get(ep.key)
            admin[ep.key] = snapshot.admin.get(ep.key)
    update = _Delta(
        snapshot.version,
        snapshot.evaluated_at,
        health,
        admin,
        peers,
        tuple(touched),
        holds={name: snapshot.holds.get(name) for name in touched},
        taken_at=snapshot.taken_at,
        statuses=_ttl_statuses((services.get(name) for name in touched), snapshot),
    )
    if change is not None:
        diff, order = change
        update = replace(
            update,
            services={name: diff.new[name] for name in diff.touched},
            added=tuple(diff.added),
            removed=tuple(diff.removed),
            order=order,
        )
    return pickle.dumps(update, protocol=pickle.HIGHEST_PROTOCOL)


Splice = tuple[int, int, tuple[str, ...]]  # names[start:stop] become these


def _splice(before: Sequence[str], after: Sequence[str]) -> Splice:
    """(start, stop, names): `after` is `before` with before[start:stop] replaced by `names`."""
    end = min(len(before), len(after))
    start = 0
    while start < end and before[start] == after[start]:
        start += 1
    tail = 0
    while tail < end - start and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    return start, len(before) - tail, tuple(after[start : len(after) - tail])


class _Services:
    """A config's services by name and in config order, kept the same on both ends of the pipe: the
    parent finds what a reload changed against it, a worker applies what the parent sent."""

    def __init__(self, config: Config) -> None:
        self.by_name = {s.name: s for s in config.services}
        self.names = [s.name for s in config.services]

    def change(self, new: Mapping[str, Service], removed: Collection[str], order: Splice | None) -> None:
        """Services set (`new`) and gone (`removed`), and how the order changed (None: it did not)."""
        for name in removed:
            self.by_name.pop(name, None)
        self.by_name.update(new)
        if order is not None:
            start, stop, names = order
            self.names[start:stop] = names

    def diff(self, config: Config, services: Mapping[str, Service]) -> tuple[ServiceDiff, Splice | None]:
        """How `config` (its services by name: `services`) differs from these, which it then becomes."""
        diff = diff_services(self.by_name, services)
        order = None
        if diff.added or diff.removed:
            order = _splice(self.names, [s.name for s in config.services])
        self.change({name: diff.new[name] for name in diff.touched}, diff.removed, order)
        return diff, order

    def apply(self, config: Config, delta: _Delta) -> tuple[Config, ServiceDiff]:
        """`config` with the delta's services, and how they differ (for AnswerBuilder.rebase)."""
        assert delta.services is not None
        self.change(delta.services, delta.removed, delta.order)
        by_name = self.by_name
        new = replace(config, services=tuple(by_name[name] for name in self.names))
        added = frozenset(delta.added)
        changed = frozenset(delta.services.keys() - added)
        return new, ServiceDiff(changed, added, frozenset(delta.removed), MappingProxyType(dict(by_name)))


def _full_snapshot(update: _Full) -> Snapshot:
    return Snapshot(
        version=update.version,
        health=CowMap(update.health),
        admin=CowMap(update.admin),
        peer_endpoints=MappingProxyType(update.peer_endpoints),
        evaluated_at=update.evaluated_at,
        holds=MappingProxyType(update.holds),
        taken_at=update.taken_at,
        statuses=MappingProxyType(update.statuses),
    )


def _apply_delta(snapshot: Snapshot, delta: _Delta) -> Snapshot:
    """`snapshot` with a delta's entries applied."""
    health: CowMap[EndpointKey, bool] = cow(snapshot.health).evolve(
        ((k, v) for k, v in delta.health.items() if v is not None),
        [k for k, v in delta.health.items() if v is None],
    )
    admin: CowMap[EndpointKey, AdminState] = cow(snapshot.admin).evolve(
        ((k, v) for k, v in delta.admin.items() if v is not None),
        [k for k, v in delta.admin.items() if v is None],
    )
    peers = dict(snapshot.peer_endpoints)
    for name, learned in delta.peer_endpoints.items():
        if learned is None:
            peers.pop(name, None)
        else:
            peers[name] = learned
    holds = snapshot.holds
    if any(delta.holds.values()) or any(name in holds for name in delta.holds):
        kept = {name: held for name, held in holds.items() if name not in delta.holds}
        kept.update((name, held) for name, held in delta.holds.items() if held)
        holds = MappingProxyType(kept)
    statuses = snapshot.statuses
    if delta.statuses:
        statuses = MappingProxyType({**statuses, **delta.statuses})
    return Snapshot(
        version=delta.version,
        health=health,
        admin=admin,
        peer_endpoints=MappingProxyType(peers) if delta.peer_endpoints else snapshot.peer_endpoints,
        evaluated_at=delta.evaluated_at,
        holds=holds,
        taken_at=delta.taken_at,
        statuses=statuses,
    )


class _Worker:
    """The parent's handle on one worker process."""

    def __init__(self, index: int, log_level: int) -> None:
        self.index = index
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_conn = ctx.Pipe(duplex=True)
        self.process: BaseProcess = ctx.Process(
            target=worker_main,
            args=(child_conn, index, log_level, active_format().value),
            name=f"gslbd-worker-{index}",
            daemon=True,
        )
        self.process.start()
        child_conn.close()  # only the child holds its end: our EOF reaches it when we go
        self.sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"gslbd-worker-{index}-pipe")
        self._reading: asyncio.AbstractEventLoop | None = None
        self.counters = CounterReport()  # the latest the worker reported

    def send(self, payload: bytes) -> None:
        """Queue a pickled update; sending happens in order on this worker's own thread."""
        self.sender.submit(self._send, payload)

    def _send(self, payload: bytes) -> None:
        with contextlib.suppress(OSError):  # the worker died; the watcher restarts it
            self.conn.send_bytes(payload)

    async def wait_ready(self) -> list[str]:
        loop = asyncio.get_running_loop()
        ok = await loop.run_in_executor(None, self.conn.poll, READY_TIMEOUT)
        if not ok:
            raise WorkerError(f"worker {self.index} did not start within {READY_TIMEOUT:.0f}s")
        try:
            kind, detail = self.conn.recv()
        except (EOFError, OSError) as exc:
            raise WorkerError(
                f"worker {self.index} died while starting (exit code {self.process.exitcode})"
            ) from exc
        if kind != "ready":
            raise WorkerError(f"worker {self.index}: {detail}")
        bound: list[str] = detail
        return bound

    def listen(self, on_message: Callable[[Any], None]) -> None:
        """After `wait_ready`: keep the counters the worker reports and hand every other message it sends
        (a received NOTIFY) to `on_message`."""
        loop = asyncio.get_running_loop()
        self._reading = loop

        def read() -> None:
            try:
                while self.conn.poll():
                    message = self.conn.recv()
                    if isinstance(message, CounterReport):
                        self.counters = message
                    else:
                        on_message(message)
            except (EOFError, OSError):
                loop.remove_reader(self.conn.fileno())
                self._reading = None

        loop.add_reader(self.conn.fileno(), read)

    def stop(self) -> None:
        if self._reading is not None:
            with contextlib.suppress(OSError, ValueError):
                self._reading.remove_reader(self.conn.fileno())
            self._reading = None
        self.sender.shutdown(wait=True, cancel_futures=True)
        self.conn.close()  # EOF: the worker closes its sockets and exits

    def join(self, timeout: float) -> None:
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.process.terminate()
            self.process.join(1.0)


class WorkerPool:
    """N worker processes answering DNS; the parent feeds them (config, snapshot) updates."""

    def __init__(self, count: int, log_level: int = logging.WARNING) -> None:
        self.count = count
        self._log_level = log_level
        self._workers: list[_Worker] = []
        self._config: Config | None = None
        self._services: _Services | None = None  # those of `_config`
        self._snapshot = Snapshot()  # the latest sent, for (re)starting workers
        self._watch: asyncio.Task[None] | None = None
        self.bound: list[str] = []
        self.restarts = 0
        self._env: object = None  # the parent's policy environment at the last publish
        self._retired = CounterReport()  # what workers that died had counted, so totals never go back
        # A NOTIFY a worker received: (zone or "", source address as an int, source is IPv6).
        self.on_notify: Callable[[str, int, bool], object] | None = None

    def _message(self, message: Any) -> None:
        notify = isinstance(message, tuple) and len(message) == 4 and message[0] == "notify"
        if notify and self.on_notify is not None:
            self.on_notify(message[1], message[2], message[3])

    def counters(self) -> CounterReport:
        """The DNS counters of all workers, as last reported (at most COUNTERS_INTERVAL old), plus those of
        workers that were restarted."""
        total = self._retired
        for worker in self._workers:
            total = total + worker.counters
        return total

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process.pid is not None]

    async def start(self, config: Config, snapshot: Snapshot, env: object = None) -> None:
        """Start every worker and wait until each has bound its sockets (WorkerError if one cannot).
        `env`: the parent's policy environment (see `publish`)."""
        self._config = config
        self._env = env
        self._services = _Services(config)
        self._snapshot = snapshot
        full = _pack_full(config, snapshot)
        try:
            for i in range(self.count):
                worker = _Worker(i, self._log_level)
                self._workers.append(worker)
                worker.send(full)
            for worker in self._workers:
                self.bound = await worker.wait_ready()
                worker.listen(self._message)
        except BaseException:
            await self.stop()
            raise
        self._watch = asyncio.get_running_loop().create_task(self._watch_workers())

    def publish(
        self,
        config: Config,
        snapshot: Snapshot,
        touched: Collection[str] | None = None,
        services: Mapping[str, Service] | None = None,
        env: object = None,
    ) -> None:
        """Send every worker what changed: a new config with the whole snapshot, or (same config) the
        entries of the `touched` services (None: every service). A new config that differs only in
        services (`services`: its services by name) under the same policy environment (`env`, the
        object the parent answers with: a reopened GeoIP database makes a new one) goes as those
        services and their entries."""
        old = self._config
        kept = env is not None and env is self._env
        self._env = env
        mirror = self._services
        if config is old and touched is not None and mirror is not None:
            kind = "snapshot"
            payload = _pack_delta(mirror.by_name, snapshot, touched)
        elif (
            kept
            and old is not None
            and mirror is not None
            and touched is not None
            and services is not None
            and same_but_services(old, config)
        ):
            change = mirror.diff(config, services)
            self._config = config
            kind = "services"
            payload = _pack_delta(mirror.by_name, snapshot, change[0].touched | set(touched), change)
        else:
            self._config = config
            self._services = _Services(config)
            kind = "config"
            payload = _pack_full(config, snapshot)
        WORKER_UPDATES.labels(kind=kind).inc()
        self._snapshot = snapshot
        for worker in self._workers:
            worker.send(payload)

    async def stop(self) -> None:
        """Close every pipe (the workers exit on EOF) and wait for them."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop()
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, w.join, STOP_TIMEOUT) for w in workers))

    async def _watch_workers(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            for pos, worker in enumerate(self._workers):
                if worker.process.exitcode is None:
                    continue
                log.warning(
                    "DNS worker %d exited with code %s; restarting it", worker.index, worker.process.exitcode
                )
                worker.stop()
                self._retired = self._retired + worker.counters
                fresh = _Worker(worker.index, self._log_level)
                self._workers[pos] = fresh
                self.restarts += 1
                assert self._config is not None
                fresh.send(_pack_full(self._config, self._snapshot))
                try:
                    await fresh.wait_ready()
                    fresh.listen(self._message)
                except WorkerError as exc:
                    log.error("DNS worker %d could not restart: %s", worker.index, exc)


# ---- the worker process ----


def worker_main(conn: Connection, index: int, log_level: int, log_format: str = "text") -> None:
    """Entry point of a worker process: serve until the parent's pipe closes. It logs in the parent's
    format (`log_format`, "text" or "json")."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent decides
    setup_logging(log_level, log_format, worker=index)
    loop_factory = None
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:
        pass
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(_serve(conn, index))


async def _serve(conn: Connection, index: int) -> None:
    loop = asyncio.get_running_loop()
    try:
        first = pickle.loads(await loop.run_in_executor(None, conn.recv_bytes))
    except (EOFError, OSError):
        return
    if not isinstance(first, _Full):
        conn.send(("error", "the first update carried no config"))
        return
    config, snapshot = first.config, _full_snapshot(first)
    services = _Services(config)
    try:
        env = build_env(config, random.Random())
        builder = AnswerBuilder(worker=index + 1)  # {worker} in dns.identity counts from 1
        view, table = builder.build(config, snapshot, env)
        responder = Responder(table, view, random.Random())
        sources = notify_sources(config)

        def on_notify(zone: str, ip: int, v6: bool) -> bool:
            """The parent polls the peer; the answer here follows the same rule (exchange.notify)."""
            conn.send(("notify", zone, ip, v6))
            return notify_accepted(sources, zone, ip, v6)

        responder.on_notify = on_notify if config.peers is not None else None  # before the first answer
        stats = ServerStats()
        # Each worker writes its own dnstap stream (to a file: FILE.<index + 1>).
        handler, sink = with_dnstap(responder, config, stats, index + 1)
        listeners = Listeners(
            config.dns.listen,
            handler,
            tcp_idle_timeout=config.dns.tcp_idle_timeout,
            reuse_port=True,
            stats=stats,
            tcp_backlog=config.dns.tcp_backlog,
            threads=config.dns.threads,
        )
        await listeners.start()
        drop_privileges(config.run_as)  # bound: nothing more needs root (a no-op when not root)
    except (OSError, GslbdError) as exc:
        conn.send(("error", str(exc)))
        return
    conn.send(("ready", [str(b) for b in listeners.bound]))
    keep_long_lived()  # the config and tables built so far live long (gcpause.py)
    done: asyncio.Future[None] = loop.create_future()
    current = config

    def on_update() -> None:
        nonlocal env, current, snapshot, sources, services
        try:
            while conn.poll():
                update = pickle.loads(conn.recv_bytes())
                touched: tuple[str, ...] | None = None
                if isinstance(update, _Full):
                    if update.config.dns.listen != current.dns.listen:
                        log.warning("listen addresses changed: restart gslbd to apply them")
                    env = build_env(update.config, random.Random())
                    current = update.config
                    services = _Services(current)
                    sources = notify_sources(current)
                    snapshot = _full_snapshot(update)
                    responder.on_notify = on_notify if current.peers is not None else None
                else:
                    if update.services is not None:  # only services changed: the same environment
                        current, diff = services.apply(current, update)
                        builder.rebase(current, env, diff)  # else the build below builds everything
                    snapshot = _apply_delta(snapshot, update)
                    touched = update.touched
                # Only the names of the touched services are rebuilt (a heartbeat tick: one name per zone).
                new_view, new_table = builder.build(current, snapshot, env, touched)
                responder.swap(new_table, new_view)
                schedule_fill()
        except (EOFError, OSError):
            loop.remove_reader(conn.fileno())
            if not done.done():
                done.set_result(None)
        except Exception:
            log.exception("could not apply an update; still answering from the previous one")

    async def report_counters() -> None:
        while True:
            await asyncio.sleep(COUNTERS_INTERVAL)
            try:
                report = CounterReport.of(
                    listeners.stats,
                    responder.policy_answers(),
                    {**responder.guard_counts(), **responder.geo_cache_counts()},
                )
                conn.send(report)
            except OSError:  # the parent is gone; on_update sees EOF and ends the worker
                return

    fill_handle: asyncio.Handle | None = None

    def fill() -> None:
        """A large view is compiled in steps (server/build.py), one slice per turn of the loop."""
        nonlocal fill_handle
        fill_handle = None
        try:
            table = builder.fill(FILL_SECONDS, wanted=responder.take_wanted())  # asked-for names first
        except Exception:
            log.exception("compiling names failed; the slow path answers them until the next full build")
            return
        if table is not None:
            view = builder.view
            responder.swap(table, view if view is not None else responder.view, lag=True)
            keep_long_lived()  # the new nodes live on: keep full collections from scanning them
        schedule_fill()

    def schedule_fill() -> None:
        nonlocal fill_handle
        if fill_handle is None and builder.filling:
            fill_handle = loop.call_soon(fill)

    loop.add_reader(conn.fileno(), on_update)
    schedule_fill()
    reporter = loop.create_task(report_counters())
    await done
    reporter.cancel()
    if fill_handle is not None:
        fill_handle.cancel()
    await listeners.close()
    if sink is not None:
        await loop.run_in_executor(None, sink.stop)
    conn.close()
    log.debug("worker %d stopped", index)
