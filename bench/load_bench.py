"""What a load feedback update costs the control plane (docs/policies/load.md): a fleet-wide load update at
10,000 services against a health-verdict update of the same services and a full build, in the same run.

N services (`policy: weighted`, `weight_from: load`, two endpoints each with a load source). Every figure
goes through the pure core (policy/load.py `observe`) into the health book as the app does; the book says
which services a change touched and the AnswerBuilder rebuilds only those, exactly as for verdicts. Rows:

    full build             every name built from nothing (what a load update must not cost); past
                           EAGER_NAMES names the services' names are compiled later, by `fill`
    load, N % of services  a new figure at every endpoint of N % of the services that moves the used
                           figure: those services rebuilt
    verdicts, every svc    one endpoint of every service goes down: all rebuilt (the reference)
    load, in the dead band figures that move the smoothed figure by less than the dead band: nothing
                           rebuilt (`touched` is empty)

Columns: the build (view and table), the C table's update after it (`update_ctable`, where the C
extension is built), the services rebuilt, and `fill`: what compiling the names a full build left out
costs afterwards (server/build.py `fill` until the table is whole, then the C copy of the whole table),
spread over the event loop's turns in the server. Compare a fleet-wide update with the full build's
build + fill: the update compiles every name it rebuilt at once, the full build only part of them.

    python bench/load_bench.py                    # 10,000 services
    python bench/load_bench.py --services 1000 20000
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections.abc import Callable

from gslbd.config import load_config_text
from gslbd.model.config import Config
from gslbd.policy.load import NO_LOAD, observe
from gslbd.policy.locate import build_env
from gslbd.server.build import FILL_SECONDS, AnswerBuilder
from gslbd.state.book import HealthBook
from gslbd.state.status import EndpointStatus
from gslbd.wire import ctable


def make_config(services: int) -> Config:
    lines = [
        "version: 1",
        "zones:",
        "  - origin: gslb.example.com.",
        "    nameservers: [{name: ns1.gslb.example.com., address: 192.0.2.53}]",
        "services:",
    ]
    for i in range(services):
        lines += [
            f"  - name: s{i}.gslb.example.com.",
            "    policy: weighted",
            "    weight_from: load",
            '    load: {url: "http://{address}:9100/load", every: 5s}',
            "    endpoints:",
            f"      - {{address: 10.{i // 250}.{i % 250}.1}}",
            f"      - {{address: 10.{i // 250}.{i % 250}.2}}",
        ]
    return load_config_text("\n".join(lines) + "\n")


Row = tuple[str, float, float, int, float]


def run(services: int, repeats: int) -> list[Row]:
    """(row, median build ms, median C update ms, services rebuilt, median fill ms) per row."""
    config = make_config(services)
    env = build_env(config, random.Random(1))
    rng = random.Random(7)
    book = HealthBook()
    builder = AnswerBuilder()
    _, table = builder.build(config, book.snapshot(), env)
    book.take_touched()
    native = ctable.build_ctable(table) if ctable.AVAILABLE else None
    now = [0.0]

    def c_update() -> float:
        nonlocal native
        if native is None:
            return 0.0
        began = time.perf_counter()
        native = ctable.update_ctable(native, table)
        return time.perf_counter() - began

    def filled() -> float:
        """Compile what the build left out (as the server's turns do) and copy the whole table to C."""
        nonlocal table
        if not table.partial:
            return 0.0
        began = time.perf_counter()
        while (more := builder.fill(FILL_SECONDS)) is not None:
            table = more
        return time.perf_counter() - began + c_update()

    def step(change: Callable[[], None]) -> tuple[float, float, int, float]:
        nonlocal table
        change()
        touched = book.take_touched()
        began = time.perf_counter()
        _, table = builder.build(config, book.snapshot(), env, touched)
        spent = time.perf_counter() - began
        return spent, c_update(), len(builder.last_change.services), filled()

    def loads(share: float, spread: float) -> Callable[[], None]:
        everyone = range(services)

        def change() -> None:
            now[0] += 5.0
            count = max(1, round(services * share))
            chosen = everyone if count >= services else rng.sample(everyone, count)
            for i in chosen:
                service = config.services[i]
                for endpoint in service.endpoints:
                    assert endpoint.load is not None
                    before = book.load(endpoint.key) or NO_LOAD
                    base = before.smoothed if before.smoothed is not None else 0.5
                    figure = max(0.0, min(1.0, base + rng.uniform(-spread, spread)))
                    book.set_load(endpoint.key, observe(before, figure, now[0], endpoint.load, None))

        return change

    verdict = [False]

    def verdicts() -> None:
        verdict[0] = not verdict[0]
        for service in config.services:
            book.record(service.endpoints[0].key, EndpointStatus(healthy=verdict[0]))

    def full() -> tuple[float, float, int, float]:
        nonlocal table
        fresh = AnswerBuilder()
        began = time.perf_counter()
        _, table = fresh.build(config, book.snapshot(), env)
        spent = time.perf_counter() - began
        c_spent = 0.0
        if ctable.AVAILABLE:
            began = time.perf_counter()
            ctable.build_ctable(table)
            c_spent = time.perf_counter() - began
        fill = 0.0
        if table.partial:
            began = time.perf_counter()
            while (more := fresh.fill(FILL_SECONDS)) is not None:
                table = more
            fill = time.perf_counter() - began
            if ctable.AVAILABLE:
                began = time.perf_counter()
                ctable.build_ctable(table)
                fill += time.perf_counter() - began
        return spent, c_spent, services, fill

    rows: list[tuple[str, Callable[[], tuple[float, float, int, float]]]] = [
        ("full build", full),
        ("load, 100 % of services", lambda: step(loads(1.0, 0.3))),
        ("load, 50 % of services", lambda: step(loads(0.5, 0.3))),
        ("load, 10 % of services", lambda: step(loads(0.1, 0.3))),
        ("load, 1 % of services", lambda: step(loads(0.01, 0.3))),
        ("verdicts, every service", lambda: step(verdicts)),
        ("load, in the dead band", lambda: step(loads(1.0, 0.0))),
    ]
    step(loads(1.0, 0.0))  # every endpoint has a figure before the rows start (and the table is whole)
    out: list[Row] = []
    for name, measure in rows:
        figures = [measure() for _ in range(repeats)]
        out.append(
            (
                name,
                statistics.median(f[0] for f in figures) * 1000,
                statistics.median(f[1] for f in figures) * 1000,
                figures[-1][2],
                statistics.median(f[3] for f in figures) * 1000,
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, nargs="*", default=[10_000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    gc.freeze()  # as `gslbd serve` does after start
    for n in args.services:
        print(f"{n} services, 2 endpoints each (weight_from: load), median of {args.repeats}")
        print(f"  {'':<26}{'build':>11}  {'C update':>10}  {'rebuilt':>8}  {'then fill':>10}")
        for name, build, c_update, rebuilt, fill in run(n, args.repeats):
            print(f"  {name:<26}{build:>8.1f} ms  {c_update:>7.1f} ms  {rebuilt:>8}  {fill:>7.1f} ms")


if __name__ == "__main__":
    main()
