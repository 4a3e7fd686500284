"""YAML documents with the line of every mapping, so that an error can name file:line."""

from __future__ import annotations

from typing import Any

import yaml

from gslbd.importers.result import ImportFailure


class LocatedDict(dict[str, Any]):
    """A YAML mapping that knows the (1-based) line it starts on."""

    line: int = 0


class _Loader(yaml.SafeLoader):
    pass


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LocatedDict:
    found = LocatedDict()
    found.line = node.start_mark.line + 1
    pairs = loader.construct_mapping(node, deep=True)
    found.update({str(key): value for key, value in pairs.items()})
    return found


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def line_of(value: object) -> int | None:
    return value.line if isinstance(value, LocatedDict) else None


def load_documents(source: str, text: str) -> list[tuple[int, object]]:
    """Every document of a (multi-document) YAML text with its first line; empty documents skipped.
    Invalid YAML is an ImportFailure at the line the parser names."""
    try:
        loader = _Loader(text)
        try:
            found: list[tuple[int, object]] = []
            while loader.check_node():
                node = loader.get_node()
                if node is None:
                    continue
                value = loader.construct_document(node)
                if value is not None:
                    found.append((node.start_mark.line + 1, value))
            return found
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ImportFailure(source, line, f"invalid YAML: {exc.problem or exc.context}") from exc
    except yaml.YAMLError as exc:
        raise ImportFailure(source, None, f"invalid YAML: {exc}") from exc
