"""A reload of a large YAML configuration that changes a few services: only their lines are read again.

After a load through config/yaml_fast.py the text, its marked tree and the items of `services:` are
remembered with what each item gave (its `Service`, when it had no problem). A reload compares the new
text with the remembered one (config/textdiff.py, as the services file compares its lines): when every
line that differs lies inside the `services:` list, only the items those lines touch are parsed again
(their lines, as a piece of the list), the others keep their values and the very same `Service`
objects, and the rest of the tree is taken as it was (its lines moved by the lines added or removed).
The generation builder then rebuilds only the services that are new objects (app/generation.py).

A piece is taken only when it is certainly what the whole text would give: every line in it is blank,
a comment, an item's `- ` at the column of the list's dashes, or indented past it, and its items read in
the subset of config/yaml_fast.py. Anything else (a change outside the list, a different indentation,
another base directory) reads the whole text again, as a first load does.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass

from gslbd.config.loader import Entry, Map, Node, Scalar, Seq
from gslbd.config.textdiff import changed
from gslbd.config.yaml_fast import FastServices, read_items


@dataclass(slots=True)
class Remembered:
    base_dir: str
    data: bytes  # the text as read
    tree: Node | None
    services: FastServices


_MEMORY: dict[str, Remembered] = {}  # configuration file (absolute path) -> its last fast load


def remember(path: str, base_dir: str, data: bytes, tree: Node | None, services: FastServices) -> None:
    """Keep a load for the next one of the same file (the values of the items that gave a service are
    dropped: what they gave is kept)."""
    known = services.known or []
    values = services.values
    for k, item in enumerate(known):
        if item is not None:
            values[k] = None
    _MEMORY[os.path.abspath(path)] = Remembered(base_dir, data, tree, services)


def forget(path: str | None = None) -> None:
    """Drop what is remembered of `path` (of every file when None)."""
    if path is None:
        _MEMORY.clear()
    else:
        _MEMORY.pop(os.path.abspath(path), None)


def recall(path: str, base_dir: str, data: bytes, text: str) -> tuple[Node | None, FastServices] | None:
    """The tree and the services of `text` (read from `path` as `data`) made from the last load of the
    same file when only items of `services:` changed; None when the whole text must be read."""
    before = _MEMORY.pop(os.path.abspath(path), None)
    if before is None or before.base_dir != base_dir:
        return None
    old, fast = before.data, before.services
    if data == old:
        return before.tree, _moved(fast, text, 0, 0, FastServices(text, fast.source, [], [], [], 0), 0)
    if not fast.lines:
        return None
    start, stop, old_stop = changed(data, old)
    head = old.count(b"\n", 0, start) + 1  # the first line that differs (1-based; the same in both)
    old_after = old.count(b"\n", 0, old_stop) + 1  # the first line after the difference, in each
    new_after = head + data.count(b"\n", start, stop)
    lines = fast.lines
    if head < lines[0] or old_after > fast.end:
        return None  # outside the list (before its first item, or after its last)
    i = bisect.bisect_right(lines, head) - 1  # the item the first change is in
    j = bisect.bisect_left(lines, old_after)  # the first item wholly after the change
    if j <= i:
        j = i + 1
    old_to = lines[j] if j < len(lines) else fast.end  # items i..j-1 span lines[i]..old_to-1
    delta = new_after - old_after
    new_to = old_to + delta
    first = lines[i]
    begin = _line_start(data, start, head, first)
    end = _line_start(data, stop, new_after, new_to)
    piece = data[begin:end]
    dash = _dash_column(old, _line_start(old, start, head, first), fast.columns[i])
    starts = _item_lines(piece, dash, first) if dash is not None else None
    if not starts:
        return None
    pieces = read_items("\n" * (first - 1) + piece.decode("utf-8"), fast.source)
    if pieces is None or pieces.lines != starts:
        return None
    return _shifted(before.tree, fast.lines[0], delta), _moved(fast, text, i, j, pieces, delta)


def _moved(fast: FastServices, text: str, i: int, j: int, pieces: FastServices, delta: int) -> FastServices:
    """`fast` with its items i..j-1 replaced by `pieces`, the items after them `delta` lines on."""
    known = fast.known or [None] * len(fast.lines)
    after = fast.lines[j:]
    return FastServices(
        text,
        fast.source,
        [*fast.values[:i], *pieces.values, *fast.values[j:]],
        [*fast.lines[:i], *pieces.lines, *(map(delta.__add__, after) if delta else after)],
        [*fast.columns[:i], *pieces.columns, *fast.columns[j:]],
        fast.end + delta,
        known=[*known[:i], *([None] * len(pieces.lines)), *known[j:]],
    )


def _line_start(data: bytes, at: int, line: int, want: int) -> int:
    """The offset of line `want` (1-based) in `data`, from offset `at`, the start of line `line`."""
    while line > want:
        at = data.rfind(b"\n", 0, at - 1) + 1
        line -= 1
    while line < want:
        found = data.find(b"\n", at)
        at = len(data) if found < 0 else found + 1
        line += 1
    return at


def _dash_column(data: bytes, at: int, column: int) -> int | None:
    """The column of the first `-` before `column` on the line at offset `at` (an item's dash)."""
    dash = data.find(b"-", at, at + column)
    return dash - at if dash >= 0 else None


def _item_lines(piece: bytes, dash: int, first: int) -> list[int] | None:
    """The lines of the items of a piece that starts at line `first`, when every line of it is blank,
    a comment, an item's dash at column `dash`, or indented past it (then the piece is read alone as it
    is read in the whole text); None otherwise."""
    items: list[int] = []
    for n, line in enumerate(piece.split(b"\n"), first):
        body = line.lstrip(b" ")
        indent = len(line) - len(body)
        if not body.strip() or body.startswith(b"#"):
            continue
        if indent == dash and body.startswith(b"-") and body[1:2] in (b"", b" ", b"\r"):
            items.append(n)
            continue
        if indent <= dash or not items:
            return None
    return items or None


def _shifted(tree: Node | None, after: int, delta: int) -> Node | None:
    """The tree with every node on a line past `after` moved `delta` lines on."""
    if not delta or tree is None:
        return tree
    return _shift(tree, after, delta)


def _shift(node: Node, after: int, delta: int) -> Node:
    line = node.line + delta if node.line > after else node.line
    if isinstance(node, Map):
        return Map(
            line,
            tuple(
                Entry(
                    e.key,
                    e.key_line + delta if e.key_line > after else e.key_line,
                    _shift(e.value, after, delta),
                )
                for e in node.entries
            ),
        )
    if isinstance(node, Seq):
        return Seq(line, tuple(_shift(item, after, delta) for item in node.items))
    return Scalar(line, node.value) if line != node.line else node
