"""How long a verdict keeps the event loop busy: a full answer build against an incremental one.

A config of N services (4 endpoints each, two sites, locality names on every other service) is built
once in full; then single verdicts flip one endpoint of a random service, and each new snapshot goes
through the same AnswerBuilder, which rebuilds only the names of the changed service. The figure that
matters is the ratio (full / one verdict), measured in the same run on the same machine. Where the C
extension is built, the last two columns are what the responder adds at each swap: the C copy of the
whole table (`build_ctable`) and its per-name update (`update_ctable`, p50).

    python bench/rebuild_bench.py                  # 250, 1,000 and 5,000 services
    python bench/rebuild_bench.py --services 2000 --verdicts 200
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from types import MappingProxyType

from gslbd.config import load_config_text
from gslbd.model.config import Config
from gslbd.model.service import EndpointKey
from gslbd.policy.locate import build_env
from gslbd.server.build import AnswerBuilder
from gslbd.state.snapshot import Snapshot
from gslbd.wire import ctable


def make_config(services: int) -> Config:
    lines = [
        "version: 1",
        "site: {name: eu, locality: {region: europe, zone: europe-b}}",
        "zones:",
        "  - origin: gslb.example.com.",
        "    nameservers: [{name: ns1.gslb.example.com., address: 192.0.2.53}]",
        "sites: {us: {locality: {region: america, zone: america-a}}}",
        "services:",
    ]
    for i in range(services):
        lines.append(f"  - name: s{i}.gslb.example.com.")
        lines.append("    check: none")
        lines.append(f"    locality_names: {'true' if i % 2 else 'false'}")
        lines.append("    endpoints:")
        for j in range(4):
            site = "eu" if j % 2 else "us"
            lines.append(f"      - {{address: 10.{i // 250}.{i % 250}.{j + 1}, site: {site}}}")
    return load_config_text("\n".join(lines) + "\n")


def run(services: int, verdicts: int, fulls: int) -> tuple[float, float, float, float, float]:
    """(median full build ms, median one-verdict build ms, p99 one-verdict build ms, C table full build
    ms, C table one-verdict update ms p50); the C figures are 0 without the extension."""
    config = make_config(services)
    env = build_env(config, random.Random(1))
    rng = random.Random(7)
    full_times = []
    for _ in range(fulls):
        started = time.perf_counter()
        AnswerBuilder().build(config, Snapshot(), env)
        full_times.append(time.perf_counter() - started)
    builder = AnswerBuilder()
    _, table = builder.build(config, Snapshot(), env)
    c_full = 0.0
    native = None
    if ctable.AVAILABLE:
        started = time.perf_counter()
        native = ctable.build_ctable(table)
        c_full = time.perf_counter() - started
    c_times = [0.0]
    health: dict[EndpointKey, bool] = {}
    one_times = []
    for version in range(1, verdicts + 1):
        endpoint = rng.choice(rng.choice(config.services).endpoints)
        health[endpoint.key] = not health.get(endpoint.key, True)
        snapshot = Snapshot(version, MappingProxyType(dict(health)))
        started = time.perf_counter()
        _, table = builder.build(config, snapshot, env)
        one_times.append(time.perf_counter() - started)
        assert not builder.last_full
        if native is not None:
            started = time.perf_counter()
            native = ctable.update_ctable(native, table)
            c_times.append(time.perf_counter() - started)
    one_times.sort()
    return (
        statistics.median(full_times) * 1000,
        statistics.median(one_times) * 1000,
        one_times[int(len(one_times) * 0.99) - 1] * 1000,
        c_full * 1000,
        statistics.median(c_times[1:] or c_times) * 1000,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, nargs="*", default=[250, 1000, 5000])
    parser.add_argument("--verdicts", type=int, default=100)
    parser.add_argument("--fulls", type=int, default=3)
    args = parser.parse_args()
    gc.freeze()  # as `gslbd serve` does after start
    print(
        f"{'services':>8}  {'full build':>11}  {'one verdict p50':>15}  {'p99':>9}  {'ratio':>7}"
        f"  {'C table full':>12}  {'C update p50':>12}"
    )
    for n in args.services:
        full, one, p99, c_full, c_one = run(n, args.verdicts, args.fulls)
        print(
            f"{n:>8}  {full:>8.1f} ms  {one:>12.2f} ms  {p99:>6.2f} ms  {full / one:>6.0f}x"
            f"  {c_full:>9.1f} ms  {c_one:>9.2f} ms"
        )


if __name__ == "__main__":
    main()
