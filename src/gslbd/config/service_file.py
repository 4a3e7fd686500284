"""`services_file`: services in a JSON Lines file, one service per line, for fleets of many services.

Each line holds one JSON object with exactly the keys of a `services[]` entry (blank lines and lines
starting with `#` are skipped). Every line is validated by the same rules as the inline services
(config/services.py); a problem names the file, the line and the field. JSON is parsed by the C
decoder, which is what makes 100,000 services cheap to read, and a line makes one service, which is
what makes a reload cheap: a validated line is remembered (per file, while the rest of the
configuration is the same text), so a reload validates only the lines that changed and reuses the
very same `Service` objects for the others. The generation builder then sees which services are new
objects and rebuilds only those (app/generation.py).

Only lines that produced no problem are remembered; the memory is one file's lines at a time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from gslbd.config.fields import MapReader, Report, string
from gslbd.config.loader import Entry, Map, Node, Scalar, Seq
from gslbd.config.services import ServiceContext, read_service
from gslbd.model.service import Service

KEY = "services_file"


_Item = tuple[Service, tuple[str, ...]]  # a service and the sites it names (sites_named)


@dataclass(slots=True)
class _Remembered:
    context: str  # the rest of the configuration these lines were validated under
    lines: dict[str, _Item]  # a line without problems (as read) -> its service


_MEMORY: dict[str, _Remembered] = {}  # services file (absolute path) -> its validated lines


def sites_named(service: Service) -> tuple[str, ...]:
    """The sites a service names, in the order its validation meets them (failover_order, weights,
    endpoints): what it adds to the known sites."""
    weights = [site for site, _ in service.weights or ()]
    return tuple(dict.fromkeys([*service.failover_order, *weights, *(e.site for e in service.endpoints)]))


def _nodes(line: int) -> json.JSONDecoder:
    """A decoder that makes the marked tree (every node at `line`) and refuses duplicate keys."""

    def node(value: object) -> Node:
        if isinstance(value, Map):
            return value
        if isinstance(value, list):
            return Seq(line, tuple(node(item) for item in value))
        return Scalar(line, value)

    def pairs(items: list[tuple[str, object]]) -> Map:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
        return Map(line, tuple(Entry(key, line, node(value)) for key, value in items))

    return json.JSONDecoder(object_pairs_hook=pairs)


def read_services_file(
    ctx: ServiceContext, root: MapReader, context: str, taken: Iterable[str]
) -> list[Service]:
    """The services of the file named by `services_file` (none when the key is absent). `context`
    identifies the rest of the configuration: lines remembered under another context are validated
    again. `taken`: the names of the services defined inline (a name may not be defined twice)."""
    text = root.opt(KEY, string)
    if text is None:
        return []
    path = ctx.rep.resolve_path(text)
    source = os.fspath(path)
    try:
        content = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        root.error(KEY, f"cannot read the services file {source!r}: {why}")
        return []
    key = os.path.abspath(source)
    before = _MEMORY.get(key)
    known = before.lines if before is not None and before.context == context else {}
    rep = Report(source, ctx.rep.base_dir)
    file_ctx = replace(ctx, rep=rep)
    lines = content.splitlines()
    # A reload of a large file changes few lines: look every line up at once, read only the others.
    hits = list(map(known.get, lines))
    items: list[_Item] = []
    numbers: list[int] = []
    fresh: dict[str, _Item] = {}
    for number, known_item in enumerate(hits, 1):
        item = known_item
        if item is None:
            raw = lines[number - 1]
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            found, remember = _read_line(file_ctx, line, number)
            if found is None:
                continue
            item = (found, sites_named(found))
            if remember:
                fresh[raw] = item
        items.append(item)
        numbers.append(number)
    items = _unique(rep, items, numbers, taken)
    for sites in dict.fromkeys(sites for _, sites in items):  # the sites named, in first-seen order
        for site in sites:
            ctx.sites_used.setdefault(site)
    ctx.rep.problems.extend(rep.problems)
    clean = {raw: hit for raw, hit in zip(lines, hits, strict=True) if hit is not None}
    clean.update(fresh)
    _MEMORY[key] = _Remembered(context, clean)
    return [service for service, _ in items]


def _unique(rep: Report, items: list[_Item], numbers: list[int], taken: Iterable[str]) -> list[_Item]:
    """`items` without the services whose name is taken already (inline or on an earlier line)."""
    inline = set(taken)
    names = [service.name for service, _ in items]
    if len(set(names)) == len(names) and inline.isdisjoint(names):
        return items
    seen = dict.fromkeys(inline, "services")
    out: list[_Item] = []
    for item, number in zip(items, numbers, strict=True):
        name = item[0].name
        if name in seen:
            rep.error(number, "name", f"duplicate service {name!r} (also {seen[name]})")
            continue
        seen[name] = f"line {number}"
        out.append(item)
    return out


def _read_line(ctx: ServiceContext, line: str, number: int) -> tuple[Service | None, bool]:
    """The service of one line (None when it has an error) and whether it met no problem at all."""
    rep = ctx.rep
    try:
        value = _nodes(number).decode(line)
    except ValueError as exc:  # JSONDecodeError included
        rep.error(number, "", f"invalid JSON: {exc}")
        return None, False
    if not isinstance(value, Map):
        rep.error(number, "", "expected one JSON object (a service) per line")
        return None, False
    first = len(rep.problems)
    service = read_service(ctx, MapReader(rep, value, "", number))
    found = rep.problems[first:]
    if any(p.severity == "error" for p in found):
        return None, False
    return service, not found


def forget() -> None:
    """Drop every remembered line (tests)."""
    _MEMORY.clear()
