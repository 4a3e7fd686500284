"""YAML to a marked tree: every mapping key and every value remembers the line it came from.

The text is composed with PyYAML's safe loader (libyaml's parser when available) into nodes, and the
node graph is walked into three small frozen types (`Map`, `Seq`, `Scalar`). Scalars are constructed by
the safe constructor, so `5` is an int, `true` a bool and `5s` a string, exactly as YAML says. Merge
keys (`<<: *anchor`) are flattened first. Problems of the text itself (invalid YAML, duplicate keys,
non-string keys) are returned, not raised.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from gslbd.errors import Problem


@dataclass(frozen=True, slots=True)
class Scalar:
    """A plain value (str, int, float, bool, None, or another YAML scalar type)."""

    line: int
    value: object


@dataclass(frozen=True, slots=True)
class Seq:
    """A list; each item keeps its own line."""

    line: int
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Entry:
    """One `key: value` of a mapping: the key's line and the value node."""

    key: str
    key_line: int
    value: Node


@dataclass(frozen=True, slots=True)
class Map:
    """A mapping with string keys, in file order."""

    line: int
    entries: tuple[Entry, ...]

    def get(self, key: str) -> Entry | None:
        for entry in self.entries:
            if entry.key == key:
                return entry
        return None


Node = Scalar | Seq | Map


_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
# The first characters for which PyYAML's safe resolver has an implicit type (bool, int, float, null,
# timestamp, merge, value): a plain scalar starting with anything else is a string.
_TYPED_FIRST = frozenset(first for first in yaml.SafeLoader.yaml_implicit_resolvers if first)
# A resolver registered for every first character (key None) would defeat the shortcut.
_SHORTCUT = None not in yaml.SafeLoader.yaml_implicit_resolvers


def _fast_loader() -> type[yaml.SafeLoader]:
    """libyaml's parser when PyYAML was built with it (the wheels are), with the resolver's common
    case answered without its per-scalar regular expressions; the tags are the safe loader's."""
    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class FastLoader(base):  # type: ignore[valid-type,misc]
        def resolve(self, kind: type[yaml.Node], value: object, implicit: tuple[bool, bool]) -> str:
            if _SHORTCUT and kind is yaml.ScalarNode and isinstance(value, str):  # noqa: SIM102
                if not implicit[0] or (value and value[0] not in _TYPED_FIRST):
                    return _STR
            tag: str = super().resolve(kind, value, implicit)
            return tag

    return FastLoader


_FAST_LOADER = _fast_loader()


class _Walker:
    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[Problem] = []
        self.constructor = yaml.SafeLoader("")
        self.done: dict[int, Node] = {}

    def walk(self, node: yaml.Node, path: str) -> Node:
        known = self.done.get(id(node))
        if known is not None:  # an alias of a node already walked
            return known
        line = node.start_mark.line + 1
        result: Node
        if isinstance(node, yaml.MappingNode):
            result = self._mapping(node, line, path)
        elif isinstance(node, yaml.SequenceNode):
            result = Seq(line, tuple(self.walk(item, f"{path}[{i}]") for i, item in enumerate(node.value)))
        else:
            result = Scalar(line, self._scalar(node, line, path))
        self.done[id(node)] = result
        return result

    def _scalar(self, node: yaml.Node, line: int, path: str) -> object:
        if node.tag == _STR:  # most scalars: the text is the value
            return node.value
        try:
            return self.constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError) as exc:  # e.g. a date like 2024-13-45, an unknown tag
            why = exc.problem if isinstance(exc, yaml.MarkedYAMLError) and exc.problem else str(exc)
            self.problems.append(Problem(self.source, line, path, f"invalid YAML value: {why}"))
            return str(node.value)

    def _mapping(self, node: yaml.MappingNode, line: int, path: str) -> Map:
        own = sum(1 for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge")
        try:
            self.constructor.flatten_mapping(node)
        except yaml.YAMLError as exc:
            why = exc.problem if isinstance(exc, yaml.MarkedYAMLError) and exc.problem else str(exc)
            self.problems.append(Problem(self.source, line, path, f"invalid YAML: {why}"))
            return Map(line, ())
        merged = len(node.value) - own  # flatten_mapping puts merged pairs first; own keys override them
        entries: dict[str, Entry] = {}
        seen: dict[str, int] = {}
        for index, (key_node, value_node) in enumerate(node.value):
            key_line = key_node.start_mark.line + 1
            key = self._scalar(key_node, key_line, path)
            if not isinstance(key, str):
                message = f"keys must be strings, got {key!r}"
                self.problems.append(Problem(self.source, key_line, path, message))
                continue
            key_path = f"{path}.{key}" if path else key
            if index >= merged:
                if key in seen:
                    message = f"duplicate key '{key}' (first on line {seen[key]})"
                    self.problems.append(Problem(self.source, key_line, key_path, message))
                    continue
                seen[key] = key_line
            entries[key] = Entry(key, key_line, self.walk(value_node, key_path))
        return Map(line, tuple(entries.values()))


def _yaml_problem(source: str, exc: yaml.YAMLError) -> Problem:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        parts = [p for p in (exc.context, exc.problem) if p]
        return Problem(source, line, "", "invalid YAML: " + ": ".join(parts))
    return Problem(source, None, "", f"invalid YAML: {exc}")


def parse_yaml(text: str, source: str, path: str = "") -> tuple[Node | None, list[Problem]]:
    """Parse one YAML document into a marked tree; (None, problems) when the text is not valid YAML.
    `path`: the dotted path of the document's root in problems (a piece of a larger file).

    An empty document gives (None, []); a document nested too deeply for the recursive composer and walker
    is one problem, not a RecursionError.
    """
    try:
        try:
            root = yaml.compose(text, Loader=_FAST_LOADER)
        except yaml.YAMLError:
            # Invalid YAML: the pure-Python parser words its errors as the error texts promise.
            try:
                root = yaml.compose(text, Loader=yaml.SafeLoader)
            except yaml.YAMLError as exc:
                return None, [_yaml_problem(source, exc)]
        if root is None:
            return None, []
        walker = _Walker(source)
        tree = walker.walk(root, path)
    except RecursionError:
        return None, [Problem(source, None, "", "invalid YAML: nested too deeply")]
    except UnicodeEncodeError as exc:  # text in memory with a lone surrogate (a file cannot hold one)
        return None, [Problem(source, None, "", f"invalid YAML: not Unicode text ({exc.reason})")]
    return tree, walker.problems
