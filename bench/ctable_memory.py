"""What the C copy of the answer table costs: memory per name and one update of one name.

Builds, in this process, the Python answer table (wire/compile.py through server/build.py's AnswerBuilder,
every name compiled) of N generated services (bench/scale.py's `mixed_services`: mixed policies, 3 IPv4 +
1 IPv6 endpoint each, two names per service: its own and its localtargets name), then its C copy
(`ctable.build_ctable`), and prints:

    py MB       resident memory the Python table added (VmRSS after it was built, minus before)
    C MB        resident memory the C copy added (VmRSS), and the bytes malloc holds for it (mallinfo2)
    B/name      the C copy's malloc bytes per name; below it, what the C table's blocks hold per name
                (`Table.layout()`: index shards, nodes, entries; shared blocks counted once)
    C / py      the C copy's resident memory as a ratio of the Python table's
    build ms    the C copy's full build
    update us   one admin change of one service (its names recompiled by `update_table`): `update_ctable`
                (median of --updates), and of that `Table.update` alone (the C part)

    python bench/ctable_memory.py                       # 10,000 and 100,000 services
    python bench/ctable_memory.py --sizes 20000 --updates 50
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

from gslbd.config import load_config
from gslbd.policy.locate import build_env
from gslbd.server.build import AnswerBuilder
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState
from gslbd.wire import ctable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import header, mixed_services  # bench/ is not a package


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_LIBC = ctypes.CDLL(None)


def malloc_bytes() -> int:
    """Bytes handed out by malloc (glibc mallinfo2: small and mmapped blocks); 0 without glibc."""
    try:
        fn = _LIBC.mallinfo2
    except AttributeError:
        return 0
    fn.restype = _MallInfo2
    info = fn()
    return int(info.uordblks + info.hblkhd)


def run(n: int, updates: int, workdir: Path) -> dict[str, float]:
    config_path = workdir / f"mem-{n}.yaml"
    services = workdir / f"mem-{n}.jsonl"
    services.write_text("\n".join(json.dumps(s, separators=(",", ":")) for s in mixed_services(n)) + "\n")
    lines = header(5300, 8300)
    lines.append(f"services_file: {services.name}")
    config_path.write_text("\n".join(lines) + "\n")
    config_path.chmod(0o600)
    config = load_config(config_path)
    env = build_env(config, random.Random(1))
    gc.collect()
    before_py = rss_kb()
    builder = AnswerBuilder(eager_names=10**9)
    _, table = builder.build(config, Snapshot(), env)
    gc.collect()
    names = len(table.names) + len(table.signed_names)
    after_py = rss_kb()
    malloc_before = malloc_bytes()
    started = time.perf_counter()
    native = ctable.build_ctable(table)
    build_ms = (time.perf_counter() - started) * 1000
    gc.collect()
    after_c = rss_kb()
    c_malloc = malloc_bytes() - malloc_before
    assert native.native.names() == len(table.names)
    _, shards, index, node_bytes, entries, refs, entry_bytes, blocks = native.native.layout()
    held = index + node_bytes + entry_bytes + blocks * 88  # 88: a header block (hblock_t)

    # One admin change at a time (the same path as a verdict): one service's first endpoint goes down,
    # then back to obey; each new table is copied with update_ctable.
    admin: dict[object, AdminState] = {}
    totals, parts = [], []
    for version in range(1, updates + 1):
        service = config.services[(version * 7919) % len(config.services)]
        key = service.endpoints[0].key
        admin[key] = AdminState.OBEY if admin.get(key) == AdminState.DOWN else AdminState.DOWN
        snapshot = Snapshot(version, admin=MappingProxyType(dict(admin)))
        _, table = builder.build(config, snapshot, env, touched=(service.name,))
        assert not builder.last_change.full
        old = native
        started = time.perf_counter()
        native = ctable.update_ctable(old, table)
        totals.append(time.perf_counter() - started)
        # The C part alone: the same update again from the old table (its result dropped).
        removed, specs = ctable._changed(old.source.names, table.names, table, old.locators)
        assert len(specs) >= 1
        started = time.perf_counter()
        old.native.update(removed, specs, (), ())
        parts.append(time.perf_counter() - started)
        old.locators.variants.clear()
    return {
        "names": names,
        "py_mb": (after_py - before_py) / 1024,
        "c_mb": (after_c - after_py) / 1024,
        "c_malloc_mb": c_malloc / 2**20,
        "per_name": c_malloc / names,
        "held_per_name": held / names,
        "index_per_name": index / names,
        "node_per_name": node_bytes / names,
        "entry_per_name": entry_bytes / names,
        "entries": entries,
        "refs": refs,
        "shards": shards,
        "ratio": (after_c - after_py) / max(1, after_py - before_py),
        "build_ms": build_ms,
        "update_us": statistics.median(totals) * 1e6,
        "c_update_us": statistics.median(parts) * 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000", help="services, comma-separated")
    parser.add_argument("--updates", type=int, default=30, help="one-service updates timed per size")
    args = parser.parse_args()
    if not ctable.AVAILABLE:
        print("gslbd.wire._cfast is not compiled here")
        return 2
    gc.freeze()
    print(
        f"{'services':>8} {'names':>7} {'py MB':>7} {'C MB':>6} {'C malloc MB':>11} {'B/name':>7}"
        f" {'C / py':>6} {'build ms':>8} {'update us':>9} {'C part us':>9}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            r = run(n, args.updates, Path(tmp))
            print(
                f"{n:>8} {r['names']:>7.0f} {r['py_mb']:>7.0f} {r['c_mb']:>6.0f} {r['c_malloc_mb']:>11.0f}"
                f" {r['per_name']:>7.0f} {r['ratio']:>6.2f} {r['build_ms']:>8.0f} {r['update_us']:>9.0f}"
                f" {r['c_update_us']:>9.0f}",
                flush=True,
            )
            print(
                f"{'':>8} held by the C table per name: {r['held_per_name']:.0f} B (index"
                f" {r['index_per_name']:.0f}, nodes {r['node_per_name']:.0f},"
                f" entries {r['entry_per_name']:.0f});"
                f" {r['entries']:.0f} entries for {r['refs']:.0f} references; {r['shards']:.0f} shards",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
