"""Kubernetes label selectors (matchLabels and matchExpressions with In, NotIn, Exists, DoesNotExist),
as a Gslb's resourceRef and an Istio Gateway's selector use them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class Selector:
    labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, frozenset[str]], ...] = ()  # (key, operator, values)

    def __bool__(self) -> bool:
        return bool(self.labels or self.expressions)

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in self.labels]
        parts += [f"{k} {op} ({','.join(sorted(values))})" for k, op, values in self.expressions]
        return ", ".join(parts)

    def matches(self, labels: Mapping[str, Any]) -> bool:
        have = {str(k): str(v) for k, v in labels.items()}
        if any(have.get(k) != v for k, v in self.labels):
            return False
        for key, op, values in self.expressions:
            present = key in have
            if op == "In" and not (present and have[key] in values):
                return False
            if op == "NotIn" and present and have[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True


def selector(match_labels: object, match_expressions: object) -> Selector:
    """A Selector from the two fields; ValueError names what is wrong with them."""
    labels: list[tuple[str, str]] = []
    if match_labels is not None:
        if not isinstance(match_labels, Mapping):
            raise ValueError("matchLabels must be a mapping")
        labels = [(str(k), str(v)) for k, v in match_labels.items()]
    expressions: list[tuple[str, str, frozenset[str]]] = []
    if match_expressions is not None:
        if not isinstance(match_expressions, list):
            raise ValueError("matchExpressions must be a list")
        for i, item in enumerate(match_expressions):
            op = item.get("operator") if isinstance(item, Mapping) else None
            if not isinstance(item, Mapping) or not isinstance(item.get("key"), str) or op not in OPERATORS:
                raise ValueError(
                    f"matchExpressions[{i}] needs a key and an operator ({', '.join(OPERATORS)})"
                )
            values = item.get("values") or []
            if not isinstance(values, list) or (op in ("In", "NotIn")) != bool(values):
                raise ValueError(
                    f"matchExpressions[{i}]: values are required by In and NotIn, refused by the others"
                )
            expressions.append((item["key"], op, frozenset(map(str, values))))
    return Selector(tuple(labels), tuple(expressions))
