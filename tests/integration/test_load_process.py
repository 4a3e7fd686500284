"""Load feedback in a real `gslbd serve` (docs/policies/load.md): HTTP backends on loopback report their
load on /load; `weight_from: load` with `shed_load` moves the answers away from a loaded backend within the
documented time (the used figure moves by MAX_STEP per interval, so 0 -> 0.9 takes 9 intervals of 200 ms)
and back once it reports a low load; a garbage body is logged once and changes nothing."""

from __future__ import annotations

from pathlib import Path

from gslbd_harness import Running, running_gslbd
from health_app_support import ThreadedBackend, wait_until

ZONE = "gslb.example.com."
APP = f"app.{ZONE}"
INTERVALS = 12  # 9 intervals of MAX_STEP to 0.9, plus the first fetch and jitter
EVERY = 0.2


def config_text(a: ThreadedBackend, b: ThreadedBackend) -> str:
    load = f"every: {EVERY}s, timeout: 150ms, half_life: 200ms"
    return f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
services:
  - name: {APP}
    policy: weighted
    weight_from: load
    shed_load: {{low: 0.5, high: 0.8}}
    endpoints:
      - {{address: 192.0.2.1, load: {{url: "http://127.0.0.1:{a.port}/load", {load}}}}}
      - {{address: 192.0.2.2, load: {{url: "http://127.0.0.1:{b.port}/load", {load}}}}}
"""


def answered(server: Running, queries: int = 40) -> set[str]:
    seen: set[str] = set()
    for _ in range(queries):
        reply = server.ask(APP)
        seen.update(rd.to_text() for rrset in reply.answer for rd in rrset)
    return seen


def test_answers_leave_a_loaded_backend_and_come_back_within_the_documented_time(tmp_path: Path) -> None:
    a, b = ThreadedBackend(), ThreadedBackend()
    a.load, b.load = b"0.1", b'{"load": 0.1}'
    try:
        with running_gslbd(tmp_path, config_text(a, b), zone=ZONE) as server:
            wait_until(lambda: answered(server) == {"192.0.2.1", "192.0.2.2"})
            a.load = b"0.95"  # above shed_load.high: leaves the answer
            wait_until(lambda: answered(server) == {"192.0.2.2"}, timeout=INTERVALS * EVERY + 5)
            b.load = b"not a number"  # garbage: ignored, the last good figure stays
            a.load = b"0.1"  # back below the return mark
            wait_until(lambda: answered(server) == {"192.0.2.1", "192.0.2.2"}, timeout=INTERVALS * EVERY + 5)
            assert server.alive()
            wait_until(lambda: "load of app.gslb.example.com. 192.0.2.2 not read: garbage" in server.log())
            assert server.log().count("192.0.2.2 not read") == 1
    finally:
        a.close()
        b.close()
