"""What a load feedback update costs the control plane (docs/policies/load.md): a fleet-wide load update at
10,000 services against a health-verdict update of the same services and a full build, in the same run.

N services (`policy: weighted`, `weight_from: load`, two endpoints each with a load source). Every figure
goes through the pure core (policy/load.py `observe`) into the health book as the app does; the book says
which services a change touched and the AnswerBuilder rebuilds only those, exactly as for verdicts. Rows:

    full build             every name built from nothing (what a load update must not cost)
    load, every service    a new figure at every endpoint that moves the used figure: all N rebuilt
    verdicts, every svc    one endpoint of every service goes down: all N rebuilt (the reference)
    load, 1 % of services  new figures at N/100 services
    load, in the dead band figures that move the smoothed figure by less than the dead band: nothing
                           rebuilt (`touched` is empty)

with, where the C extension is built, the C table's update after each (`update_ctable`).

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
from gslbd.server.build import AnswerBuilder
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


def run(services: int, repeats: int) -> list[tuple[str, float, float, int]]:
    """(row, median build ms, median C update ms, services rebuilt) per row."""
    config = make_config(services)
    env = build_env(config, random.Random(1))
    rng = random.Random(7)
    fulls = []
    for _ in range(repeats):
        began = time.perf_counter()
        AnswerBuilder().build(config, HealthBook().snapshot(), env)
        fulls.append(time.perf_counter() - began)
    book = HealthBook()
    builder = AnswerBuilder()
    _, table = builder.build(config, book.snapshot(), env)
    book.take_touched()
    native = ctable.build_ctable(table) if ctable.AVAILABLE else None
    now = [0.0]

    def step(change: Callable[[], None]) -> tuple[float, float, int]:
        nonlocal native, table
        change()
        touched = book.take_touched()
        began = time.perf_counter()
        _, table = builder.build(config, book.snapshot(), env, touched)
        spent = time.perf_counter() - began
        c_spent = 0.0
        if native is not None:
            began = time.perf_counter()
            native = ctable.update_ctable(native, table)
            c_spent = time.perf_counter() - began
        return spent, c_spent, len(builder.last_change.services)

    def loads(chosen: list[int], spread: float) -> Callable[[], None]:
        def change() -> None:
            now[0] += 5.0
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

    everyone = list(range(services))

    def some() -> None:
        loads(rng.sample(everyone, max(1, services // 100)), 0.3)()

    rows: list[tuple[str, Callable[[], None]]] = [
        ("load, every service", loads(everyone, 0.3)),
        ("verdicts, every svc", verdicts),
        ("load, 1 % of services", some),
        ("load, in the dead band", loads(everyone, 0.0)),
    ]
    loads(everyone, 0.0)()  # every endpoint has a figure before the rows start
    step(lambda: None)
    out = [("full build", statistics.median(fulls) * 1000, 0.0, services)]
    for name, change in rows:
        figures = [step(change) for _ in range(repeats)]
        out.append(
            (
                name,
                statistics.median(f[0] for f in figures) * 1000,
                statistics.median(f[1] for f in figures) * 1000,
                figures[-1][2],
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
        print(f"  {'':<24}{'build':>11}  {'C update':>10}  {'services rebuilt':>16}")
        for name, build, c_update, rebuilt in run(n, args.repeats):
            print(f"  {name:<24}{build:>8.1f} ms  {c_update:>7.1f} ms  {rebuilt:>16}")


if __name__ == "__main__":
    main()
