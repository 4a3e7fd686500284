"""CowMap: an immutable mapping whose changes copy only the shards they touch."""

from __future__ import annotations

import pickle
import random

from hypothesis import given
from hypothesis import strategies as st

from gslbd.cow import CowMap

keys = st.one_of(st.text(max_size=6), st.integers(-50, 50), st.binary(max_size=4))


@given(
    st.dictionaries(keys, st.integers()),
    st.dictionaries(keys, st.integers()),
    st.lists(keys),
)
def test_evolve_equals_the_same_changes_on_a_dict_and_leaves_the_original(
    start: dict[object, int], updates: dict[object, int], removals: list[object]
) -> None:
    base = CowMap(start)
    new = base.evolve(updates, removals)
    expected = dict(start)
    expected.update(updates)
    for key in removals:
        expected.pop(key, None)
    assert dict(new) == expected
    assert len(new) == len(expected)
    assert dict(base) == start  # never modified
    for key, value in expected.items():
        assert key in new
        assert new[key] == value
        assert new.get(key) == value


def test_a_change_shares_every_shard_it_does_not_touch() -> None:
    base = CowMap((f"name{i}", i) for i in range(10_000))
    new = base.evolve({"name5": -5})
    shared = sum(a is b for a, b in zip(base.shards, new.shards, strict=True))
    assert shared == len(base.shards) - 1
    assert new["name5"] == -5
    assert base["name5"] == 5
    assert base.evolve() is base
    assert base.evolve(removals=["absent"]) is base


def test_a_cowmap_pickles_to_the_same_items_in_another_process_hash_order() -> None:
    rng = random.Random(3)
    base = CowMap((rng.randbytes(8), i) for i in range(500))
    copy = pickle.loads(pickle.dumps(base))
    assert isinstance(copy, CowMap)
    assert dict(copy) == dict(base)
