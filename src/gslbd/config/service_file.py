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

import bisect
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from operator import itemgetter
from pathlib import Path

from gslbd.config.fast import fast_service
from gslbd.config.fields import MapReader, Report, string
from gslbd.config.loader import Entry, Map, Node, Scalar, Seq
from gslbd.config.service_context import ServiceContext
from gslbd.config.services import read_service, sites_named
from gslbd.config.textdiff import changed
from gslbd.model.service import Service

KEY = "services_file"
# Where a key ends (its closing quote, then the colon): at least one per key of the line, so that more
# keys in the text than in the decoded objects means a key given twice (the located decoder reports it).
_KEY_END = re.compile(r'"\s*:')


# What json.loads runs, without its Python wrapping (made by JSONDecoder.__init__; typeshed lacks it).
_SCAN: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _keys(line: str) -> int:
    """How many keys the JSON text has at least (more when a string holds `":`)."""
    if " " in line or "\t" in line or "\r" in line:  # JSON's white space may stand before a colon
        return len(_KEY_END.findall(line))
    return line.count('":')


_Item = tuple[Service, tuple[str, ...]]  # a service and the sites it names (sites_named)


@dataclass(frozen=True, slots=True)
class _Reread:
    """A line read again at every load, so that its problem is reported again: `item` is its service
    when the problem is only a warning."""

    item: _Item | None = None


_UNREAD = _Reread()  # a line not read yet
# What a line of the file gave: a service without problems, nothing (blank or comment), or a _Reread.
_Line = _Item | None | _Reread


@dataclass(slots=True)
class _Remembered:
    context: str  # the rest of the configuration these lines were validated under
    data: bytes  # the file as read
    items: list[_Line]  # what each line gave (a line ends at b"\n")
    numbers: list[int]  # the lines that gave a service (ascending)
    found: list[_Item]  # their services
    names: set[str] | None  # the names of those services (None: some were duplicates)
    rereads: list[int]  # the indexes of the lines that are read again at every load (ascending)


@dataclass(frozen=True, slots=True)
class ServicesFile:
    """The services of a services file, with the line of each (for problems found later)."""

    source: str
    services: list[Service]
    lines: list[int]


_MEMORY: dict[str, _Remembered] = {}  # services file (absolute path) -> its validated lines


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
) -> ServicesFile | None:
    """The services of the file named by `services_file` (None when the key is absent or the file
    cannot be read, which is reported). `context` identifies the rest of the configuration: lines
    remembered under another context are validated again. `taken`: the names of the services defined
    inline (a name may not be defined twice)."""
    text = root.opt(KEY, string)
    if text is None:
        return None
    path = ctx.rep.resolve_path(text)
    source = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        root.error(KEY, f"cannot read the services file {source!r}: {exc.strerror or exc}")
        return None
    key = os.path.abspath(source)
    before = _MEMORY.get(key)
    if before is not None and before.context != context:
        before = None
    rep = Report(source, ctx.rep.base_dir)
    inline = set(taken)
    try:
        now = _load(replace(ctx, rep=rep), data, before, inline, context)
    except BaseException:
        _MEMORY.pop(key, None)  # it may be half updated: the next load reads every line
        raise
    for sites in dict.fromkeys(map(itemgetter(1), now.found)):  # the sites named, in first-seen order
        for site in sites:
            ctx.sites_used.setdefault(site)
    ctx.rep.problems.extend(rep.problems)
    _MEMORY[key] = now
    return ServicesFile(source, list(map(itemgetter(0), now.found)), now.numbers)


def _load(
    ctx: ServiceContext, data: bytes, before: _Remembered | None, inline: set[str], context: str
) -> _Remembered:
    """What the lines give. A reload of a large file changes few lines: the lines before the first and
    after the last line that differ from the previous load (found by comparing bytes) are taken as they
    were, and the lines between are looked up among the previous load's lines between (or read). When
    nothing outside that middle needs reading again, the services and their names are patched, not
    gathered anew; only the middle is split into lines."""
    old = before.data if before is not None else b""
    old_items = before.items if before is not None else []
    start, stop, old_stop = changed(data, old)
    # One pass over the file counts its lines: before the change (start is a line's start), in it and
    # after it; the previous load had one item per line.
    head = data.count(b"\n", 0, start)
    after = data.count(b"\n", stop)
    tail = after + 1 if stop < len(data) or old_stop < len(old) else 0
    lines_now, lines_old = head + data.count(b"\n", start, stop) + after + 1, len(old_items)
    end, old_end = lines_now - tail, lines_old - tail
    middle_lines = data[start:stop].split(b"\n")[: end - head]
    known = {
        line: item
        for line, item in zip(old[start:old_stop].split(b"\n"), old_items[head:old_end], strict=False)
        if type(item) is tuple
    }
    middle = [known.get(line) or _read_line(ctx, line, head + i + 1) for i, line in enumerate(middle_lines)]
    items = [*old_items[:head], *middle, *old_items[old_end:]]
    if before is not None and before.names is not None and _only_between(before.rereads, head, old_end):
        patched = _patch(before, middle, head, old_end, end, inline)
        if patched is not None:
            rereads = [head + i for i, item in enumerate(middle) if type(item) is _Reread]
            return _Remembered(context, data, items, *patched, rereads)
    rereads = []
    lines: list[bytes] | None = None
    for index, item in enumerate(items):  # outside the middle: lines with problems are read again
        if type(item) is _Reread and not head <= index < end:
            lines = data.split(b"\n") if lines is None else lines
            items[index] = _read_line(ctx, lines[index], index + 1)
        if type(items[index]) is _Reread:
            rereads.append(index)
    numbers, found = _served(items)
    found, numbers, names = _unique(ctx.rep, found, numbers, inline)
    return _Remembered(context, data, items, numbers, found, names, rereads)


def _only_between(indexes: list[int], low: int, high: int) -> bool:
    """Whether every index of the ascending `indexes` is in low..high-1."""
    return not indexes or (indexes[0] >= low and indexes[-1] < high)


def _patch(
    before: _Remembered, middle: list[_Line], head: int, old_end: int, end: int, inline: set[str]
) -> tuple[list[int], list[_Item], set[str]] | None:
    """`before`'s (line numbers, services, names) with those of its lines head..old_end replaced by
    the `middle` (now lines head..end); None when a name of the middle is taken (then everything is
    checked again). Takes over `before.names` (not copied: `before` is not used again)."""
    names = before.names
    assert names is not None
    first = bisect.bisect_right(before.numbers, head)
    last = bisect.bisect_right(before.numbers, old_end)
    numbers, found = _served(middle)
    gone = [service.name for service, _ in before.found[first:last]]
    names.difference_update(gone)
    new = [service.name for service, _ in found]
    if len(set(new)) != len(new) or not names.isdisjoint(new) or not inline.isdisjoint(new):
        names.update(gone)  # as it was
        return None
    names.update(new)
    shift = end - old_end
    return (
        [*before.numbers[:first], *map(head.__add__, numbers), *map(shift.__add__, before.numbers[last:])],
        [*before.found[:first], *found, *before.found[last:]],
        names,
    )


def _served(items: list[_Line]) -> tuple[list[int], list[_Item]]:
    """The lines that give a service (their numbers) and their services, in file order."""
    if not any(isinstance(item, _Reread) and item.item is not None for item in items):
        return (
            [n for n, item in enumerate(items, 1) if isinstance(item, tuple)],
            [item for item in items if isinstance(item, tuple)],
        )
    pairs = [(n, item if isinstance(item, tuple) else item.item) for n, item in enumerate(items, 1) if item]
    kept = [(n, item) for n, item in pairs if item is not None]
    return [n for n, _ in kept], [item for _, item in kept]


def _unique(
    rep: Report, items: list[_Item], numbers: list[int], inline: set[str]
) -> tuple[list[_Item], list[int], set[str] | None]:
    """`items` (at lines `numbers`) without the services whose name is taken already (inline or on an
    earlier line), and their names (None when some were left out)."""
    names = [service.name for service, _ in items]
    unique = set(names)
    if len(unique) == len(names) and inline.isdisjoint(unique):
        return items, numbers, unique
    seen = dict.fromkeys(inline, "services")
    out: list[_Item] = []
    lines: list[int] = []
    for item, number in zip(items, numbers, strict=True):
        name = item[0].name
        if name in seen:
            rep.error(number, "name", f"duplicate service {name!r} (also {seen[name]})")
            continue
        seen[name] = f"line {number}"
        out.append(item)
        lines.append(number)
    return out, lines, None


def _read_line(ctx: ServiceContext, raw: bytes, number: int) -> _Line:
    """What one line gives: its service and sites, None for a blank line or a comment, a _Reread when
    it has a problem (reported; an error leaves the service out, a warning keeps it for this load)."""
    rep = ctx.rep
    try:
        line = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        rep.error(number, "", f"not UTF-8: {exc}")
        return _UNREAD
    if not line or line.startswith("#"):
        return None
    try:  # the C scanner itself: json.loads without its Python wrapping (the line is stripped)
        plain, end = _SCAN(line, 0)
    except (ValueError, StopIteration):
        plain, end = None, 0  # the located decoder below says where and why
    if type(plain) is dict and end == len(line):
        fast = fast_service(ctx, plain, _keys(line))
        if fast is not None:
            return fast
    try:
        value = _nodes(number).decode(line)
    except ValueError as exc:  # JSONDecodeError included
        rep.error(number, "", f"invalid JSON: {exc}")
        return _UNREAD
    if not isinstance(value, Map):
        rep.error(number, "", "expected one JSON object (a service) per line")
        return _UNREAD
    first = len(rep.problems)
    service = read_service(ctx, MapReader(rep, value, "", number))
    found = rep.problems[first:]
    if service is None or any(p.severity == "error" for p in found):
        return _UNREAD
    item = (service, sites_named(service))
    return _Reread(item) if found else item


def forget() -> None:
    """Drop every remembered line (tests)."""
    _MEMORY.clear()
