"""`gslbd import k8gb FILE...` and `gslbd import octodns FILE`: other GSLB declarations as a gslbd
services file (JSON Lines) on stdout or -o, and a report of what was not mapped on stderr or --report.
Bad input is a located error, exit 1, and nothing written (docs/import.md)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from gslbd.importers.result import Imported, ImportFailure


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `import` to the gslbd command line; it sets `args.run(args) -> int`."""
    p = sub.add_parser(
        "import",
        help="make a services file (JSON Lines) from k8gb Gslb objects or octoDNS dynamic records",
        description="Read k8gb Gslb objects (with the objects they refer to) or an octoDNS zone file and "
        "write the services they declare as a gslbd services file, with a report of what could not be "
        "mapped.",
    )
    kinds = p.add_subparsers(dest="source", metavar="SOURCE", required=True)
    k8gb = kinds.add_parser(
        "k8gb", help="Gslb objects as `kubectl get -o yaml` prints them (one file per cluster)"
    )
    k8gb.add_argument("files", nargs="+", metavar="FILE", help="YAML: one cluster's objects per file")
    octodns = kinds.add_parser("octodns", help="an octoDNS YAML zone file with dynamic records")
    octodns.add_argument("files", nargs=1, metavar="FILE", help="the zone file (e.g. example.com.yaml)")
    octodns.add_argument(
        "--zone", default=None, metavar="ORIGIN", help="the zone's origin (default: the file name less .yaml)"
    )
    for q in (k8gb, octodns):
        q.add_argument("-o", "--output", default=None, metavar="FILE", help="write here (default stdout)")
        q.add_argument(
            "--report", default=None, metavar="FILE", help="write the report here (default stderr)"
        )
    p.set_defaults(run=run_import)


def _zone_of(path: str) -> str:
    name = Path(path).name
    for suffix in (".yaml", ".yml"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _write(path: str, text: str) -> None:
    """Replaces `path` whole (a temporary file renamed), so a failure leaves what was there."""
    target = Path(path)
    fd, temp = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def run_import(args: argparse.Namespace) -> int:
    texts: list[tuple[str, str]] = []
    try:
        for path in args.files:
            texts.append((path, Path(path).read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError) as exc:
        print(f"gslbd import: cannot read {path}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return 1
    try:
        result: Imported
        if args.source == "k8gb":
            from gslbd.importers.k8gb import import_k8gb

            result = import_k8gb(texts)
        else:
            from gslbd.importers.octodns import import_octodns

            result = import_octodns(texts[0][0], texts[0][1], args.zone or _zone_of(texts[0][0]))
    except ImportFailure as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        if args.output:
            _write(args.output, result.lines())
        else:
            sys.stdout.write(result.lines())
        if args.report:
            _write(args.report, result.report_text())
        else:
            sys.stderr.write(result.report_text())
    except OSError as exc:
        print(f"gslbd import: cannot write: {exc}", file=sys.stderr)
        return 1
    return 0
