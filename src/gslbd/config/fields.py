"""Reading the marked YAML tree: problem collection, typed getters and scalar converters.

A converter is a function `Node -> T` that raises `Invalid(message)` when the node is wrong; the
`MapReader` getters turn that into a `Problem` at the node's line and dotted path and carry on with a
default, so validation always runs to the end and reports every problem at once. A YAML `null` (an
empty value) counts as "not given" everywhere.
"""

from __future__ import annotations

import difflib
import math
import re
import sys
from collections.abc import Callable, Collection, Iterator
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from gslbd.config.loader import Map, Node, Scalar, Seq
from gslbd.errors import Problem
from gslbd.types import choices

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)


class Invalid(Exception):
    """A value is wrong; `message` says why (without the location, which the caller adds)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Report:
    """Collects problems for one source file; `base_dir` anchors relative file paths."""

    def __init__(self, source: str, base_dir: Path) -> None:
        self.source = source
        self.base_dir = base_dir
        self.problems: list[Problem] = []

    def error(self, line: int | None, path: str, message: str) -> None:
        self.problems.append(Problem(self.source, line, path, message))

    def warn(self, line: int | None, path: str, message: str) -> None:
        self.problems.append(Problem(self.source, line, path, message, "warning"))

    @property
    def failed(self) -> bool:
        return any(p.severity == "error" for p in self.problems)

    def resolve_path(self, text: str) -> Path:
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.base_dir / path


def join(path: str, key: str | int) -> str:
    """The dotted path of a child: join("a", "b") == "a.b", join("a", 2) == "a[2]"."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def describe(node: Node) -> str:
    """What a node is, for "expected X, got Y" messages."""
    if isinstance(node, Map):
        return "a mapping"
    if isinstance(node, Seq):
        return "a list"
    return describe_value(node.value)


def describe_value(value: object) -> str:
    """What a plain value (a scalar as YAML or JSON gives it) is, for "expected X, got Y" messages."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    return f"{type(value).__name__} {value!r}"


def is_null(node: Node) -> bool:
    return isinstance(node, Scalar) and node.value is None


def suggest(word: str, valid: Collection[str]) -> str:
    """'; did you mean 'x'?' when a valid word is close, else ''."""
    close = difflib.get_close_matches(word, list(valid), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


class MapReader:
    """A mapping being validated at `path`; `line` is where missing keys are reported."""

    def __init__(self, rep: Report, node: Map, path: str, line: int) -> None:
        self.rep = rep
        self.node = node
        self.path = path
        self.line = line
        # key -> entry (the first, as Map.get): readers ask for many keys, most of them absent.
        self._entries = {e.key: e for e in reversed(node.entries)}

    def keys(self) -> list[str]:
        return [e.key for e in self.node.entries]

    def check_keys(self, allowed: Collection[str]) -> None:
        """Report every key that is not in `allowed`, with a suggestion when one is close."""
        for entry in self.node.entries:
            if entry.key in allowed:
                continue
            hint = suggest(entry.key, allowed) or "; valid keys: " + ", ".join(sorted(allowed))
            self.rep.error(entry.key_line, join(self.path, entry.key), f"unknown key '{entry.key}'{hint}")

    def has(self, key: str) -> bool:
        entry = self._entries.get(key)
        return entry is not None and not is_null(entry.value)

    def node_of(self, key: str) -> Node | None:
        entry = self._entries.get(key)
        if entry is None or is_null(entry.value):
            return None
        return entry.value

    def line_of(self, key: str) -> int:
        """The line to report a problem with a key's value: the value's own line for a scalar, the
        key's line for a list or mapping (whose first item may be on a later line)."""
        entry = self._entries.get(key)
        if entry is None:
            return self.line
        return entry.value.line if isinstance(entry.value, Scalar) else entry.key_line

    def key_line(self, key: str) -> int:
        entry = self._entries.get(key)
        return self.line if entry is None else entry.key_line

    def at(self, key: str) -> str:
        return join(self.path, key)

    def error(self, key: str, message: str) -> None:
        self.rep.error(self.line_of(key), self.at(key), message)

    def warn(self, key: str, message: str) -> None:
        self.rep.warn(self.line_of(key), self.at(key), message)

    def missing(self, key: str) -> None:
        self.rep.error(self.line, self.at(key), "required key is missing")

    def opt(self, key: str, conv: Callable[[Node], T]) -> T | None:
        """The converted value, or None when absent or invalid (then a problem is reported)."""
        node = self.node_of(key)
        if node is None:
            return None
        return convert(self.rep, node, self.at(key), conv)

    def get(self, key: str, conv: Callable[[Node], T], default: T) -> T:
        value = self.opt(key, conv)
        return default if value is None else value

    def req(self, key: str, conv: Callable[[Node], T]) -> T | None:
        if not self.has(key):
            self.missing(key)
            return None
        return self.opt(key, conv)

    def list_of(
        self, key: str, conv: Callable[[Node], T], single: bool = True
    ) -> list[tuple[T, str, int]] | None:
        """Converted items of a list as (value, path, line); invalid items are reported and left out.

        With `single`, a lone scalar counts as a list of one. None when the key is absent or not a list.
        """
        node = self.node_of(key)
        if node is None:
            return None
        pairs: list[tuple[Node, str]]
        if single and isinstance(node, Scalar):
            pairs = [(node, self.at(key))]
        elif isinstance(node, Seq):
            pairs = [(item, join(self.at(key), i)) for i, item in enumerate(node.items)]
        else:
            self.rep.error(node.line, self.at(key), f"expected a list, got {describe(node)}")
            return None
        out: list[tuple[T, str, int]] = []
        for item, path in pairs:
            value = convert(self.rep, item, path, conv)
            if value is not None:
                out.append((value, path, item.line))
        return out

    def sub(self, key: str) -> MapReader | None:
        """A nested mapping, or None when absent (or not a mapping, which is reported)."""
        node = self.node_of(key)
        if node is None:
            return None
        return as_map(self.rep, node, self.at(key), self.key_line(key))

    def items(self, key: str) -> Iterator[tuple[Node, str]]:
        """The items of a nested list with their paths (a non-list is reported and yields nothing)."""
        node = self.node_of(key)
        if node is None:
            return
        if not isinstance(node, Seq):
            self.rep.error(node.line, self.at(key), f"expected a list, got {describe(node)}")
            return
        for i, item in enumerate(node.items):
            yield item, join(self.at(key), i)


def as_map(rep: Report, node: Node, path: str, line: int | None = None) -> MapReader | None:
    if not isinstance(node, Map):
        rep.error(node.line, path, f"expected a mapping, got {describe(node)}")
        return None
    return MapReader(rep, node, path, node.line if line is None else line)


def convert(rep: Report, node: Node, path: str, conv: Callable[[Node], T]) -> T | None:
    try:
        return conv(node)
    except Invalid as exc:
        rep.error(node.line, path, exc.message)
        return None
    except (ValueError, TypeError, OverflowError) as exc:  # a library's parser refused the value
        rep.error(node.line, path, f"invalid value: {exc}")
        return None


def scalar(node: Node, what: str) -> object:
    if not isinstance(node, Scalar):
        raise Invalid(f"expected {what}, got {describe(node)}")
    return node.value


def string(node: Node) -> str:
    value = scalar(node, "a string")
    if not isinstance(value, str):
        raise Invalid(f"expected a string, got {describe(node)}")
    return value


def nonempty_string(node: Node) -> str:
    value = string(node)
    if not value.strip():
        raise Invalid("must not be empty")
    return value


def boolean(node: Node) -> bool:
    value = scalar(node, "true or false")
    if not isinstance(value, bool):
        raise Invalid(f"expected true or false, got {describe(node)}")
    return value


def integer(lo: int | None = None, hi: int | None = None) -> Callable[[Node], int]:
    """An int in lo..hi (both inclusive, either may be open)."""

    def conv(node: Node) -> int:
        value = scalar(node, "an integer")
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(f"expected an integer, got {describe(node)}")
        check_range(value, lo, hi)
        return value

    return conv


def _num(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def check_range(value: float, lo: float | None, hi: float | None) -> None:
    if lo is not None and hi is not None and not lo <= value <= hi:
        raise Invalid(f"must be between {_num(lo)} and {_num(hi)}, got {_num(value)}")
    if lo is not None and value < lo:
        raise Invalid(f"must be at least {_num(lo)}, got {_num(value)}")
    if hi is not None and value > hi:
        raise Invalid(f"must be at most {_num(hi)}, got {_num(value)}")


def number(lo: float | None = None, hi: float | None = None) -> Callable[[Node], float]:
    def conv(node: Node) -> float:
        value = scalar(node, "a number")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Invalid(f"expected a number, got {describe(node)}")
        check_range(value, lo, hi)
        return float(value)

    return conv


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_HELP = "use seconds or a number with a unit: 500ms, 5s, 2m, 1h"


def parse_duration(text: str) -> float:
    """'500ms' -> 0.5, '1m30s' -> 90.0, '5' -> 5.0; raises Invalid."""
    cleaned = text.strip().replace(" ", "")
    try:
        return float(cleaned)
    except ValueError:
        pass
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(cleaned):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(cleaned) or not cleaned:
        raise Invalid(f"invalid duration {text!r}; {_DURATION_HELP}")
    return total


def duration(positive: bool = True) -> Callable[[Node], float]:
    """Seconds from a number or a string with units; must be > 0 when `positive`, else >= 0."""

    def conv(node: Node) -> float:
        value = scalar(node, "a duration")
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise Invalid(f"expected a duration, got {describe(node)}; {_DURATION_HELP}")
        seconds = parse_duration(value) if isinstance(value, str) else float(value)
        if not math.isfinite(seconds):
            raise Invalid(f"invalid duration {value!r}; {_DURATION_HELP}")
        if positive and seconds <= 0:
            raise Invalid(f"must be longer than 0, got {value!r}")
        if seconds < 0:
            raise Invalid(f"must not be negative, got {value!r}")
        return seconds

    return conv


TTL_MAX = 2**31 - 1


def ttl(node: Node) -> int:
    """A TTL: whole seconds as an integer (30) or a duration string ("5m")."""
    value = scalar(node, "a TTL")
    if isinstance(value, str):
        seconds = duration(positive=False)(node)
        if seconds != int(seconds):
            raise Invalid(f"a TTL must be whole seconds, got {value!r}")
        value = int(seconds)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"expected a TTL in seconds, got {describe(node)}")
    check_range(value, 0, TTL_MAX)
    return value


def enum(kind: type[E], what: str) -> Callable[[Node], E]:
    """A member of a StrEnum by its spelling; the error lists every valid one."""

    def conv(node: Node) -> E:
        value = node.value if isinstance(node, Scalar) else None
        if not isinstance(value, str):
            raise Invalid(f"{what} must be one of {choices(kind)}, got {describe(node)}")
        try:
            return kind(value)
        except ValueError:
            raise Invalid(f"unknown {what} {value!r}; valid: {choices(kind)}") from None

    return conv


SITE_NAME = re.compile(r"[a-z0-9-]+\Z")


def site_name(node: Node) -> str:
    value = string(node)
    if not SITE_NAME.match(value):
        raise Invalid(f"invalid site name {value!r}; must match [a-z0-9-]+")
    return sys.intern(value)  # named by every endpoint: one string per site, not one per mention
