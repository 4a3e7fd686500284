"""Health-check scale benchmark: the prober's CPU and memory for N HTTP endpoints at a 10 s interval.

    python bench/health_scale.py                      # 1,000 and 10,000 endpoints, 30 s each
    python bench/health_scale.py --endpoints 10000 --duration 60

Three kinds of process: one parent (this), one backend process serving a tiny HTTP/1.1 200 on `--ports`
loopback ports, and per run one prober process running gslbd's HealthScheduler with the real http probe
over N endpoints (distinct answered addresses 10.x.y.z, probe_address 127.0.0.1, spread over the ports),
feeding every result through the verdict machine as the app does. The prober's CPU (utime+stime from
/proc/PID/stat) is measured over `--duration` seconds after a warm-up of one interval, and its RSS at the
end. Only the prober is measured: it is what gslbd pays for health checking. The loop is uvloop when
installed, as in `gslbd serve`; set GSLBD_BENCH_NO_UVLOOP=1 to measure asyncio's own loop.

Target (issue 3): under 50 % of one core and under 400 MB RSS at 10,000 endpoints.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"


def _loop_factory() -> None:
    if os.environ.get("GSLBD_BENCH_NO_UVLOOP"):
        return
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


class _Backend(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if b"\r\n\r\n" in data:
            self.transport.write(RESPONSE)  # type: ignore[attr-defined]
            self.transport.close()


async def run_backends(count: int) -> None:
    loop = asyncio.get_running_loop()
    ports = []
    for _ in range(count):
        server = await loop.create_server(_Backend, "127.0.0.1", 0, backlog=4096)
        ports.append(server.sockets[0].getsockname()[1])
    print(",".join(str(p) for p in ports), flush=True)
    await asyncio.Event().wait()


async def run_prober(endpoints: int, ports: list[int], interval: float, report_every: float) -> None:
    from gslbd.clock import SystemClock
    from gslbd.health.fsm import step
    from gslbd.health.scheduler import HealthScheduler
    from gslbd.model.check import Check
    from gslbd.model.service import Endpoint, EndpointKey
    from gslbd.state.status import EndpointStatus, ProbeResult
    from gslbd.types import CheckType, EndpointKind

    clock = SystemClock()
    checks = [
        Check(
            name=f"p{port}", type=CheckType.HTTP, port=port, path="/healthz", interval=interval, timeout=2.0
        )
        for port in ports
    ]
    eps = [
        Endpoint(
            service=f"svc{i // 100}.gslb.example.com.",
            address=f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}",
            kind=EndpointKind.IPV4,
            site="eu",
            check=checks[i % len(checks)],
            probe_address="127.0.0.1",
        )
        for i in range(endpoints)
    ]
    book: dict[EndpointKey, EndpointStatus] = {}
    counts = {"ok": 0, "fail": 0}
    details: dict[str, int] = {}

    def on_result(ep: Endpoint, result: ProbeResult) -> None:
        assert ep.check is not None
        book[ep.key] = step(
            book.get(ep.key, EndpointStatus()), result, clock.wall(), ep.check.rise, ep.check.fall
        )
        counts["ok" if result.ok else "fail"] += 1
        if not result.ok:
            details[result.detail] = details.get(result.detail, 0) + 1

    scheduler = HealthScheduler(clock, random.Random(1), on_result)
    await scheduler.start(eps)
    while True:
        await asyncio.sleep(report_every)
        worst = sorted(details.items(), key=lambda kv: -kv[1])[:3]
        print(f"probes ok={counts['ok']} fail={counts['fail']} {worst}", flush=True)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> tuple[float, float]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def _last_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    lines = proc.stdout.read() or ""
    return lines.strip().splitlines()[-1] if lines.strip() else ""


def measure(
    endpoints: int, ports: list[int], interval: float, duration: float, warmup: float
) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--prober", "--endpoints", str(endpoints), "--interval", str(interval)]
    cmd += ["--backend-list", ",".join(map(str, ports)), "--report-every", str(max(1.0, duration / 3))]
    prober = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(warmup)
        if prober.poll() is not None:
            raise RuntimeError(f"prober exited with {prober.returncode}")
        cpu0, t0 = _cpu_seconds(prober.pid), time.monotonic()
        time.sleep(duration)
        cpu1, t1 = _cpu_seconds(prober.pid), time.monotonic()
        rss, hwm = _rss_mb(prober.pid)
        last = _last_line(prober)
    finally:
        prober.terminate()
        prober.wait(10)
    cpu = 100 * (cpu1 - cpu0) / (t1 - t0)
    print(
        f"{endpoints:>6} endpoints @ {interval:g}s: CPU {cpu:5.1f} % of one core, "
        f"RSS {rss:6.1f} MB (peak {hwm:.1f} MB)"
    )
    print(f"        {last}")
    return {"endpoints": endpoints, "cpu": cpu, "rss": rss, "hwm": hwm}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoints", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds measured per run")
    parser.add_argument(
        "--warmup", type=float, default=None, help="seconds before measuring (default interval + 2)"
    )
    parser.add_argument("--ports", type=int, default=16, help="backend ports (spreads connections)")
    parser.add_argument("--backend", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prober", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend-list", default="", help=argparse.SUPPRESS)
    parser.add_argument("--report-every", type=float, default=10.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    _loop_factory()
    if args.backend:
        asyncio.run(run_backends(args.ports))
        return 0
    if args.prober:
        ports = [int(p) for p in args.backend_list.split(",")]
        asyncio.run(run_prober(args.endpoints[0], ports, args.interval, args.report_every))
        return 0
    backend = subprocess.Popen(
        [sys.executable, __file__, "--backend", "--ports", str(args.ports)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert backend.stdout is not None
        ports = [int(p) for p in backend.stdout.readline().strip().split(",")]
        warmup = args.warmup if args.warmup is not None else args.interval + 2
        for n in args.endpoints:
            measure(n, ports, args.interval, args.duration, warmup)
    finally:
        backend.terminate()
        backend.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
