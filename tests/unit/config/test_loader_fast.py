"""The fast YAML path (libyaml with a shortcut in the resolver) gives every scalar the tag and value
PyYAML's pure safe loader gives it, so configs mean the same whichever parser read them."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gslbd.config.loader import _FAST_LOADER

SCALARS = st.one_of(
    st.sampled_from(
        [
            "yes",
            "No",
            "on",
            "OFF",
            "~",
            "null",
            "true",
            "1.5",
            "-3",
            "0x1f",
            "1_000",
            "0o17",
            "2024-01-01",
            "190:20:30",
            ".inf",
            "+1",
            "5s",
            "2001:db8::1",
            "app",
            "_x",
            "'q'",
            '"1"',
        ]
    ),
    st.text(alphabet="abcyYnN01:.-+_~ tT", min_size=1, max_size=8).map(str.strip).filter(bool),
)


@given(SCALARS)
def test_the_fast_loader_types_every_scalar_like_the_safe_loader(value: str) -> None:
    text = f"k: {value}\n"
    try:
        expected = yaml.load(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, ValueError) as refused:  # ValueError: PyYAML's int of "0b_" (int("", 2))
        with pytest.raises(type(refused)):
            yaml.load(text, Loader=_FAST_LOADER)
        return
    got = yaml.load(text, Loader=_FAST_LOADER)
    assert repr(got) == repr(expected)  # repr: a NaN equals nothing, not even itself
    assert type(got["k"]) is type(expected["k"])
