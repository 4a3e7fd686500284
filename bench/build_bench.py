"""The cost of one full answer build at N services, stage by stage, in one process.

The config is bench/scale.py's (mixed policies, 3 IPv4 + 1 IPv6 endpoint per service, JSON Lines
services file). Each stage runs once, in the order a server runs them at start, and prints its wall time
and the resident memory it added (VmRSS before and after; the objects it makes stay alive until the
end, as the server keeps them):

    view      answer/build.py ViewBuilder.build: every service decided (nothing deferred)
    compile   wire/compile.py compile_table: every name compiled to wire bytes
    C build   wire/ctable.py build_ctable: the compiled table copied into C (0 without the extension)
    total     the three together; `RSS` the process's resident memory after them

    PYTHONPATH=src python bench/build_bench.py                   # 20,000 services
    PYTHONPATH=src python bench/build_bench.py --services 100000 --profile compile
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from scale import write_config

from gslbd.answer import ViewBuilder
from gslbd.config import load_config
from gslbd.model.config import Config
from gslbd.policy.locate import build_env
from gslbd.state.snapshot import Snapshot
from gslbd.wire import compile_table, ctable

T = TypeVar("T")
STAGES = ("view", "compile", "cbuild")


def rss_mb() -> float:
    """This process's resident memory (VmRSS) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def staged(name: str, profile: str | None, run: Callable[[], T]) -> tuple[T, float, float]:
    """`run()`'s result, wall seconds and RSS delta in MB; profiled (top 25 by cumulative time) when
    `profile` names this stage."""
    gc.collect()
    before = rss_mb()
    profiler = cProfile.Profile() if profile == name else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    result = run()
    if profiler is not None:
        profiler.disable()
    seconds = time.perf_counter() - started
    delta = rss_mb() - before
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return result, seconds, delta


def load(services: int) -> Config:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gslbd.yaml"
        write_config(path, "jsonl", services, 53, 8053)
        path.chmod(0o600)  # it holds the API token
        return load_config(path)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, default=20_000)
    parser.add_argument("--profile", choices=STAGES, help="print a cProfile of this stage")
    args = parser.parse_args()
    config = load(args.services)
    env = build_env(config, random.Random(1))
    gc.freeze()  # as `gslbd serve` does after loading the config
    start_rss = rss_mb()

    def view_stage() -> object:
        return ViewBuilder().build(config, Snapshot(), env)[0]

    view, view_s, view_mb = staged("view", args.profile, view_stage)
    table, compile_s, compile_mb = staged(
        "compile",
        args.profile,
        lambda: compile_table(
            view,  # type: ignore[arg-type]
            max_udp_payload=config.dns.max_udp_payload,
            use_client_subnet=config.topology.use_client_subnet,
        ),
    )
    c_s = c_mb = 0.0
    if ctable.AVAILABLE:
        _, c_s, c_mb = staged("cbuild", args.profile, lambda: ctable.build_ctable(table))
    total_s, total_mb = view_s + compile_s + c_s, view_mb + compile_mb + c_mb
    print(f"{args.services} services, {len(table.names)} names, C extension: {ctable.AVAILABLE}")
    print(f"{'stage':<8} {'seconds':>8} {'+RSS MB':>8}")
    for stage, seconds, mb in (
        ("view", view_s, view_mb),
        ("compile", compile_s, compile_mb),
        ("C build", c_s, c_mb),
        ("total", total_s, total_mb),
    ):
        print(f"{stage:<8} {seconds:>8.2f} {mb:>8.1f}")
    print(f"RSS {rss_mb():.0f} MB (after loading the config: {start_rss:.0f} MB)")


if __name__ == "__main__":
    main()
