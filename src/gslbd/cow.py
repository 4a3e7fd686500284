"""An immutable mapping that changes by copying only the part that changed.

The control plane keeps several mappings with one entry per service, endpoint or name (verdicts,
admin overrides, the view's names, the answer table, per-service counts). At 100,000 services a plain
dict copy per change costs milliseconds; a verdict must reach the answers faster than that. A
`CowMap` splits its entries into `SHARDS` dicts by hash: `evolve` copies the shards it touches and
shares the others with the mapping it came from, which it never modifies. A lookup is one hash and two
subscripts; `shard_of(key)` gives the query path the dict to look in without a method call.

Hashes of str and bytes differ between processes (hash randomization): a CowMap pickles as a plain
dict of its items and is rebuilt on the other side.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

SHARDS = 256
MASK = SHARDS - 1


class CowMap(Mapping[K, V]):
    """Read-only; `evolve` returns a new map. Iteration order: by shard, then insertion."""

    __slots__ = ("_len", "shards")

    shards: tuple[dict[K, V], ...]

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        shards: list[dict[K, V]] = [{} for _ in range(SHARDS)]
        pairs = items.items() if isinstance(items, Mapping) else items
        for key, value in pairs:
            shards[hash(key) & MASK][key] = value
        self.shards = tuple(shards)
        self._len = sum(len(s) for s in shards)

    @classmethod
    def _of(cls, shards: tuple[dict[K, V], ...], size: int) -> CowMap[K, V]:
        new: CowMap[K, V] = cls.__new__(cls)
        new.shards = shards
        new._len = size
        return new

    def __getitem__(self, key: K) -> V:
        return self.shards[hash(key) & MASK][key]

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, default: V | T, /) -> V | T: ...
    def get(self, key: K, default: object = None) -> object:
        return self.shards[hash(key) & MASK].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.shards[hash(key) & MASK]

    def __iter__(self) -> Iterator[K]:
        for shard in self.shards:
            yield from shard

    def __len__(self) -> int:
        return self._len

    def evolve(
        self, updates: Mapping[K, V] | Iterable[tuple[K, V]] = (), removals: Iterable[K] = ()
    ) -> CowMap[K, V]:
        """A new map with `updates` set and `removals` gone (absent keys are ignored); the shards that
        neither touches are shared with this map."""
        shards = list(self.shards)
        copied: set[int] = set()
        size = self._len
        pairs = updates.items() if isinstance(updates, Mapping) else updates
        for key, value in pairs:
            index = hash(key) & MASK
            if index not in copied:
                shards[index] = dict(shards[index])
                copied.add(index)
            shard = shards[index]
            if key not in shard:
                size += 1
            shard[key] = value
        for key in removals:
            index = hash(key) & MASK
            if key not in shards[index]:
                continue
            if index not in copied:
                shards[index] = dict(shards[index])
                copied.add(index)
            del shards[index][key]
            size -= 1
        if not copied:
            return self
        return CowMap._of(tuple(shards), size)

    def __reduce__(self) -> tuple[Any, ...]:
        return (CowMap, (dict(self.items()),))

    def __repr__(self) -> str:
        return f"CowMap({len(self)} items)"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CowMap) and other.shards is self.shards:
            return True
        return Mapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]


def cow(items: Mapping[K, V]) -> CowMap[K, V]:
    """A CowMap of `items` (a CowMap is returned as it is)."""
    if isinstance(items, CowMap):
        return items
    return CowMap(items)
