"""DNS transports: UDP and TCP listeners, socket binding, worker processes, counters.

    Listeners(addresses, handler, tcp_idle_timeout=...)   UDP + TCP on every address, in this process
    WorkerPool(count)                                     `dns.workers` processes sharing the addresses
    compile_answers(config, snapshot, env)                (view, table) for a config and a snapshot
    ServerStats                                           counters of one process's listeners

The handler is anything with `handle(data, src_ip, src_v6, tcp=False) -> bytes | None` (the wire
layer's `Responder`). Nothing here decides an answer, and nothing is logged per query.
"""

from gslbd.server.build import compile_answers
from gslbd.server.handler import Handler
from gslbd.server.listeners import Bound, Listeners
from gslbd.server.stats import ServerStats
from gslbd.server.workers import WorkerError, WorkerPool

__all__ = ["Bound", "Handler", "Listeners", "ServerStats", "WorkerError", "WorkerPool", "compile_answers"]
