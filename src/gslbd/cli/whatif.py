"""`gslbd whatif`: what a candidate config (or an admin change) would do to the queries of a dnstap
capture, replayed offline through the current and the candidate generation (app/whatif.py)."""

from __future__ import annotations

import argparse
import json
import sys

from gslbd.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `whatif` to the gslbd command line; it sets `args.run(args) -> int`."""
    p = sub.add_parser(
        "whatif",
        help="replay a dnstap capture through the current and a candidate config and say what changes",
        description="Replay the queries of a dnstap capture (the file log.dnstap.file writes) through "
        "the current generation and a candidate one, offline, and print the share of queries, client "
        "networks and services whose answer changes, and the load per site before and after.",
    )
    p.add_argument(
        "--dnstap",
        required=True,
        action="append",
        metavar="FILE",
        help="a dnstap capture (a Frame Streams file, as log.dnstap.file writes); repeatable, read in turn",
    )
    p.add_argument("--config", "-c", required=True, metavar="FILE", help="the candidate configuration (YAML)")
    p.add_argument(
        "--current",
        default=None,
        metavar="FILE",
        help="the configuration the server runs now (default: --config, to see an --admin change alone)",
    )
    p.add_argument(
        "--admin",
        action="append",
        default=[],
        metavar="'KEY=VALUE... STATE'",
        help="an admin change in the candidate, e.g. 'site=eu down' (keys site, region, service glob, "
        "address prefix, tag=a,b, combined with AND; state up, down or obey; repeatable, later ones win)",
    )
    p.add_argument("--seed", type=int, default=0, help="the seed of the random draws (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_whatif)


def run_whatif(args: argparse.Namespace) -> int:
    from gslbd.app.whatif import Replayer, SelectorMatchesNothing, admin_overrides, replay
    from gslbd.app.whatif_report import compare, report_json, report_lines
    from gslbd.cli.configs import load_or_report
    from gslbd.model.selector import parse_admin
    from gslbd.server.dnstap.capture import CaptureError, read_queries

    try:
        changes = [parse_admin(text) for text in args.admin]
    except ValueError as exc:
        print(f"gslbd whatif: --admin {exc}", file=sys.stderr)
        return 2
    candidate, _ = load_or_report(args.config)
    if candidate is None:
        return 1
    current = candidate
    if args.current is not None:
        loaded, _ = load_or_report(args.current)
        if loaded is None:
            return 1
        current = loaded
    try:
        admin = admin_overrides(candidate, changes)
    except SelectorMatchesNothing as exc:
        print(f"gslbd whatif: {exc}", file=sys.stderr)
        return 2
    queries = []
    for path in args.dnstap:  # a worker's file may hold no query: only all of them empty is an error
        try:
            queries += read_queries(path)
        except CaptureError as exc:
            print(f"gslbd whatif: --dnstap {exc}", file=sys.stderr)
            return 1
    if not queries:
        print(
            f"gslbd whatif: --dnstap {', '.join(args.dnstap)}: no queries in it (log.dnstap.queries must "
            "be true)",
            file=sys.stderr,
        )
        return 1
    try:
        before = Replayer.for_config(current, {}, args.seed)
        after = Replayer.for_config(candidate, admin, args.seed)
    except ConfigError as exc:
        print(f"gslbd whatif: {exc}", file=sys.stderr)
        return 1
    report = compare(replay(queries, before, after))
    if args.json:
        print(json.dumps({"replayed": len(queries), **report_json(report)}, indent=2))
    else:
        print(f"replayed {len(queries)} queries of {', '.join(args.dnstap)}")
        print("\n".join(report_lines(report)))
    return 0
