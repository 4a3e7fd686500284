"""A configuration's YAML read fast: libyaml straight into values, marks only where a problem is located.

PyYAML's C loader makes a node and two marks per scalar and resolves each tag in Python: at 100,000
inline services that is seconds before validation starts. `_cyaml` (C, over libyaml) reads the text
once and makes the marked tree of config/loader.py for everything but the items of a top-level
`services:` block list, and for those only their plain values and the line and column each starts at
(`FastServices`). config/fast.py validates a plain service without any mark; an item it cannot take
(a rare shape, or one with a problem to report) is read again with marks from its own lines
(`FastServices.marked`), so every problem is still worded and located as the marked loader does.

`_cyaml` reads a subset of YAML (no anchors, aliases, tags, merge keys, non-string or duplicate keys, a
single document) and types scalars as the safe loader does, leaving to it (`_resolve`) what it cannot
decide cheaply; anything outside the subset, and invalid YAML, is read by config/loader.py's marked
loader alone, as before (slower, the same result). `GSLBD_NATIVE=0` does the same.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace

import yaml

from gslbd.config.loader import Entry, Map, Node, Scalar, Seq, parse_yaml
from gslbd.errors import Problem
from gslbd.model.service import Service

try:
    from gslbd.config import _cyaml
except ImportError:  # not compiled here (no libyaml header): the marked loader reads everything
    _cyaml = None  # type: ignore[assignment]

_STR = "tag:yaml.org,2002:str"
_BAIL = object()
# The safe loader's implicit resolvers by first character, as _cyaml.c knows them: it makes the
# strings, ints, bools and nulls they would make without asking them.
_KNOWN = {
    **dict.fromkeys("yYtTfFoO", ("bool",)),
    **dict.fromkeys("nN", ("bool", "null")),
    **dict.fromkeys("0123456789", ("float", "int", "timestamp")),
    **dict.fromkeys("-+", ("float", "int")),
    ".": ("float",),
    "<": ("merge",),
    "~": ("null",),
    "": ("null",),
    "=": ("value",),
    **dict.fromkeys("!&*", ("yaml",)),  # indicators: never the start of a plain scalar
}


def _resolvers() -> dict[str, tuple[str, ...]]:
    return {
        first: tuple(sorted(tag.rsplit(":", 1)[1] for tag, _ in found))
        for first, found in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


_AS_KNOWN = _resolvers() == _KNOWN
_RESOLVER = yaml.SafeLoader("")


def _resolve(text: str) -> object:
    """A plain scalar `_cyaml` could not type: the safe loader's value, or _BAIL when it has none."""
    tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if tag == _STR:
        return text
    try:
        return _RESOLVER.construct_object(yaml.ScalarNode(tag, text), deep=True)
    except (yaml.YAMLError, ValueError):  # e.g. a date like 2024-13-45: the marked loader says why
        return _BAIL
    finally:
        _RESOLVER.constructed_objects.clear()


_SPEC = SimpleNamespace(map=Map, entry=Entry, seq=Seq, scalar=Scalar, resolve=_resolve, bail=_BAIL)


def available() -> bool:
    """Whether the fast reader is used: compiled, not switched off, and PyYAML's resolvers as known."""
    return _cyaml is not None and _AS_KNOWN and os.environ.get("GSLBD_NATIVE", "1") != "0"


# An item's service, the sites it names (config/service_file.py sites_named) and the check profiles it
# names: what it adds to the context.
Known = tuple[Service, tuple[str, ...], tuple[str, ...]]


@dataclass(slots=True)
class FastServices:
    """The items of the top-level `services:` block list, read without marks: item k is `values[k]`,
    starting at line `lines[k]`, column `columns[k]`; its text runs to the next item's line (the last
    item's to `end`, the line after the list)."""

    text: str
    source: str
    values: list[object]
    lines: list[int]
    columns: list[int]
    end: int
    # What each item gave when it gave a service without a problem (None for the others), filled by
    # config/services.py; on a reload, what is known already (config/yaml_reload.py).
    known: list[Known | None] | None = None
    _starts: list[int] | None = field(default=None, repr=False)

    def span(self, k: int) -> tuple[int, int]:
        """The lines of item k: first, and the line after its last."""
        return self.lines[k], self.lines[k + 1] if k + 1 < len(self.lines) else self.end

    def marked(self, k: int) -> tuple[Node | None, list[Problem]]:
        """Item k read again with marks, from its own lines (the lines before it left blank, its first
        line's `- ` too), its problems named by its path `services[k]`."""
        if self._starts is None:
            starts = [0]
            text = self.text
            at = text.find("\n")
            while at >= 0:
                starts.append(at + 1)
                at = text.find("\n", at + 1)
            self._starts = starts
        first, after = self.span(k)
        starts = self._starts
        begin = starts[first - 1] + self.columns[k]
        stop = starts[after - 1] if after - 1 < len(starts) else len(self.text)
        piece = "\n" * (first - 1) + " " * self.columns[k] + self.text[begin:stop]
        return parse_yaml(piece, self.source, f"services[{k}]")


def read_fast(text: str, source: str) -> tuple[Node | None, FastServices | None] | None:
    """(the marked tree, the services read without marks or None) when `_cyaml` reads the text; None
    when it cannot (outside its subset, invalid YAML, not available): read it with parse_yaml then."""
    if not available():
        return None
    try:
        found = _cyaml.load(text.encode("utf-8"), _SPEC, False)
    except (ValueError, UnicodeError):  # invalid YAML: the marked loader words it
        return None
    if found is _BAIL:
        return None
    tree, services = found
    if services is None:
        return tree, None
    values, lines, columns, end = services
    return tree, FastServices(text, source, values, lines, columns, end)


def read_items(text: str, source: str) -> FastServices | None:
    """The items of a piece of a services list (its lines in place, the others blank), or None."""
    if not available():
        return None
    try:
        found = _cyaml.load(text.encode("utf-8"), _SPEC, True)
    except (ValueError, UnicodeError):
        return None
    if found is _BAIL:
        return None
    _, (values, lines, columns, end) = found
    return FastServices(text, source, values, lines, columns, end)
