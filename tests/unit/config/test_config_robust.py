"""Whatever a config file holds, validation ends in a Config or in problems, never in a crash."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gslbd.config import check_config_text

FULL: Any = yaml.safe_load((resources.files("gslbd") / "examples" / "full.yaml").read_text(encoding="utf-8"))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "5s", "0", "-1", "@", ".", "::1", "[::1]:53", "10.0.0.0/8", "none", "eu", "a..b"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["name", "type", "address", "x", "port", "site"]), inner, max_size=3),
    ),
    max_leaves=6,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += paths(value, (*prefix, i))
    return out


ALL_PATHS = paths(FULL)[1:]


def replaced(tree: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(tree, dict):
        return {k: (replaced(v, rest, value) if k == head else v) for k, v in tree.items()}
    return [replaced(v, rest, value) if i == head else v for i, v in enumerate(tree)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ALL_PATHS), values), min_size=1, max_size=3))
def test_any_value_anywhere_gives_a_config_or_problems(changes: list[tuple[tuple[Any, ...], Any]]) -> None:
    tree = FULL
    for path, value in changes:
        try:
            tree = replaced(tree, path, value)
        except (TypeError, IndexError):  # an earlier change removed this path
            continue
    text = yaml.safe_dump(tree, allow_unicode=True)
    config, problems = check_config_text(text, "fuzz.yaml")
    errors = [p for p in problems if p.severity == "error"]
    assert (config is None) == bool(errors)
    assert all(p.file == "fuzz.yaml" and p.message for p in problems)
