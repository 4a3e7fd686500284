"""`gslbd serve` processes in cluster mode: a lock holder killed with SIGKILL (no goodbye, its locks stay
behind) is replaced once its lock's TTL has run out, and the survivors keep the answers right."""

from __future__ import annotations

import time
from pathlib import Path

from cluster_support import ADDRESSES, APP, ZONE, cluster_config, counting_backend
from gslbd_harness import Running, start_gslbd
from health_app_support import wait_until
from redis_support import running_redis

A, B, C = ADDRESSES
LOCK_A = f"gslb:lock:{ZONE}:{APP}:{A}"
INTERVAL = 0.5
LOCK_TTL = 2.0  # max(interval / 2, 2 s)


def addresses(server: Running) -> list[str]:
    reply = server.ask(APP)
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def test_a_killed_lock_holder_is_replaced_after_the_lock_ttl(tmp_path: Path) -> None:
    with running_redis(tmp_path) as redis_server, counting_backend() as backend:
        text = cluster_config(redis_server.url, backend.port, interval="500ms")
        servers = [start_gslbd(tmp_path, text, zone=ZONE, name=f"gslbd-{i}") for i in range(3)]
        try:
            client = redis_server.client()
            wait_until(lambda: client.get(LOCK_A) is not None, timeout=10.0)
            holder = str(client.get(LOCK_A))
            pid = int(holder.split(":")[1])  # "<host>:<pid>:<random>"
            [victim] = [s for s in servers if s.proc.pid == pid]
            survivors = [s for s in servers if s is not victim]

            victim.kill()
            killed = time.monotonic()
            assert client.get(LOCK_A) == holder  # left behind: nobody may take it before it expires
            wait_until(lambda: client.get(LOCK_A) not in (None, holder), timeout=10.0, step=0.01)
            replaced = time.monotonic() - killed
            new_holder = str(client.get(LOCK_A))
            assert int(new_holder.split(":")[1]) in {s.proc.pid for s in survivors}
            # The lock was renewed at most one interval before the kill and lives 2 s; the next
            # cycle after it expired takes it (plus a little time for busy machines).
            assert LOCK_TTL - INTERVAL - 0.1 <= replaced <= LOCK_TTL + INTERVAL + 1.5, replaced

            # The survivors still notice a failure, and answer it.
            backend.failing.add(A)
            wait_until(lambda: all(addresses(s) == [B, C] for s in survivors), timeout=10.0)
            probes = backend.count(A)
            time.sleep(6 * INTERVAL)
            rate = (backend.count(A) - probes) / 6
            assert 0.6 <= rate <= 1.4, rate  # one prober again, not two
        finally:
            for server in servers:
                server.kill()
