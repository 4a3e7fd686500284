"""What zone cuts and DNAMEs cost the query path (docs/wire.md, *Zone cuts and DNAME*).

The same zone is compiled twice, without and with a zone cut and a DNAME in its static records, and the
same ordinary queries (an existing name, a nonexistent name) are timed through `Responder.handle` on the
C table and on the Python fast path; the figures are printed as ratios with/without (1.00 = no cost). The
referral at the cut (a fixed entry of the table), below the cut and below the DNAME (the slow path) are
printed too. Run: python bench/delegation_bench.py [--rounds N]

Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import random
import time

import dns.message

from gslbd.answer import build_view
from gslbd.config import load_config_text
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder, compile_table, ctable

ORIGIN = "gslb.example.com."
BASE = f"""
version: 1
zones:
  - origin: {ORIGIN}
    nameservers: [{{name: ns1.{ORIGIN}, address: 192.0.2.53}}]
    records:
      - {{name: info, type: TXT, value: hello}}
"""
CUTS = """      - {name: sub, type: NS, value: [ns1.sub, ns.example.net.]}
      - {name: ns1.sub, type: A, value: 192.0.2.10}
      - {name: old, type: DNAME, value: info.gslb.example.com.}
"""
SERVICES = f"""services:
  - name: app.{ORIGIN}
    endpoints: [{{address: 192.0.2.1}}, {{address: 192.0.2.2}}]
"""


def responder(text: str, native: bool) -> Responder:
    view = build_view(
        load_config_text(text), Snapshot(version=1), PolicyEnv(NoLocator(), {}, random.Random(1))
    )
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    return Responder(table, view, random.Random(1), native=native)


def per_query(r: Responder, name: str, rounds: int) -> float:
    wire = dns.message.make_query(name, "A").to_wire()
    handle = r.handle
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(rounds):
            handle(wire, 0xCB007105, False, False)
        best = min(best, (time.perf_counter_ns() - start) / rounds)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20000)
    rounds = parser.parse_args().rounds
    paths = [("C table", True)] if ctable.AVAILABLE else []
    paths.append(("Python fast path", False))
    for label, native in paths:
        plain = responder(BASE + SERVICES, native)
        cut = responder(BASE + CUTS + SERVICES, native)
        for what, name in (("existing name", f"app.{ORIGIN}"), ("nonexistent name", f"nope.{ORIGIN}")):
            a, b = per_query(plain, name, rounds), per_query(cut, name, rounds)
            print(f"{label:17} {what:17} without {a:7.0f} ns  with cuts {b:7.0f} ns  ratio {b / a:.2f}")
        for what, name in (
            ("referral at cut", f"sub.{ORIGIN}"),
            ("below the cut", f"www.sub.{ORIGIN}"),
            ("below the DNAME", f"x.old.{ORIGIN}"),
        ):
            print(f"{label:17} {what:17} {per_query(cut, name, max(rounds // 20, 100)):7.0f} ns")


if __name__ == "__main__":
    main()
