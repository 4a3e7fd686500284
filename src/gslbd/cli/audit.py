"""`gslbd audit`: ask every site's nameservers for every service (or a sample) with ECS for each topology
network and once without, and report the answers that differ between sites (docs/operations.md).
Exit code 0 when every site agrees, 1 when something diverges, 2 when the audit cannot run."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from itertools import groupby

from gslbd.audit.ask import AuditResult, audit_sites, run_audit, settle_time
from gslbd.audit.compare import Answer, Divergence
from gslbd.cli.configs import load_or_report


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `audit` to the gslbd command line; it sets `args.run(args) -> int`."""
    p = sub.add_parser(
        "audit",
        help="compare what every site answers for every service; exit 1 when they diverge",
        description="Ask this site and every peer site (or, without peers, every nameserver of the zones) "
        "for each service, with EDNS Client Subnet for each topology network and once without, and "
        "report the services whose answer sets differ.",
    )
    p.add_argument("--config", "-c", required=True, metavar="FILE", help="the YAML configuration")
    p.add_argument("--sample", type=int, default=0, metavar="N", help="audit N services drawn at random")
    p.add_argument("--seed", type=int, default=None, help="seed of the --sample draw (default: random)")
    p.add_argument(
        "--tries",
        type=int,
        default=3,
        metavar="N",
        help="askings per question for policies that answer "
        "by chance (round_robin, weighted, random; default 3)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="per query (default peers.timeout, else 1)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=None,
        metavar="SECONDS",
        help="wait before asking "
        "again what differed (default peers.interval + peers.timeout: the staleness bound)",
    )
    p.add_argument("--port", type=int, default=53, help="port of the zones' nameservers (without peers)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    p.set_defaults(run=run_audit_command)


def _shown(answer: Answer, rtype: str) -> str:
    return ", ".join(sorted(a.removeprefix(f"{rtype} ") for a in answer))


def table(result: AuditResult) -> str:
    """A table per divergent service: client network, this site's answer set, the peer's."""
    blocks = []
    for service, rows in groupby(result.divergences, key=lambda d: d.question.service):
        lines = [f"{service}"]
        cells = [("client network", "type", result.reference, "site", "answer")]
        for d in rows:
            q = d.question
            cells.append(
                (q.network or "(no ECS)", q.rtype, _shown(d.ours, q.rtype), d.peer, _shown(d.theirs, q.rtype))
            )
        widths = [max(len(c[k]) for c in cells) for k in range(4)]
        for c in cells:
            lines.append("  " + "  ".join(c[k].ljust(widths[k]) for k in range(4)) + "  " + c[4])
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _row(d: Divergence) -> dict[str, object]:
    q = d.question
    return {
        "service": q.service,
        "name": q.name,
        "type": q.rtype,
        "client_network": q.network,
        "site_a": d.reference,
        "answer_a": sorted(d.ours),
        "site_b": d.peer,
        "answer_b": sorted(d.theirs),
    }


def as_json(result: AuditResult) -> str:
    return json.dumps(
        {
            "reference": result.reference,
            "sites": list(result.sites),
            "questions": result.questions,
            "divergent_services": sorted({d.question.service for d in result.divergences}),
            "divergent_services_per_peer": result.per_peer(),
            "divergences": [_row(d) for d in result.divergences],
        },
        indent=2,
    )


def run_audit_command(args: argparse.Namespace) -> int:
    config, _ = load_or_report(args.config)
    if config is None:
        return 2
    if args.sample < 0 or args.tries < 1:
        print("gslbd audit: --sample must be 0 or more and --tries 1 or more", file=sys.stderr)
        return 2
    if len(audit_sites(config, args.port)) < 2:
        print(
            f"gslbd audit: {args.config}: fewer than two sites to compare (no peers.sites with "
            "nameservers, and fewer than two zone nameservers with addresses)",
            file=sys.stderr,
        )
        return 2
    timeout = args.timeout if args.timeout is not None else (config.peers.timeout if config.peers else 1.0)
    settle = args.settle if args.settle is not None else settle_time(config)
    rng = random.Random(args.seed)
    result = asyncio.run(
        run_audit(
            config,
            sample=args.sample,
            rng=rng,
            timeout=timeout,
            settle=settle,
            tries=args.tries,
            port=args.port,
        )
    )
    if args.json:
        print(as_json(result))
    else:
        if result.divergences:
            print(table(result))
            print()
        services = len({d.question.service for d in result.divergences})
        print(
            f"{result.questions} questions asked of {', '.join(result.sites)}: "
            f"{services} divergent service{'' if services == 1 else 's'}"
        )
    return 1 if result.divergences else 0
