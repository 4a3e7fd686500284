"""select: how an answer is cut from the order a policy puts the candidates in.

`select: rotate` (the default, every release before `select`) answers the group the policy chose: the
failover tier, the geo set, the weighted site or endpoint, the hashed endpoint (rotated or drawn per
query as the policy does). `select: first_n` (NS1's Select First N) answers the first `max_answers` of
the policy's whole order instead: the chosen group first (still rotated or drawn), then the candidates
the policy would turn to next, so that a client or resolver that cannot reach the first addresses has
the next best ones in the same answer. Each policy says what its order is (docs/policies/select.md);
for round_robin and random the rotation or shuffle already orders every candidate, so the two are the
same.
"""

from __future__ import annotations

from collections.abc import Iterable

from gslbd.model.service import Endpoint


def followed_by(first: tuple[Endpoint, ...], rest: Iterable[Endpoint], count: int) -> tuple[Endpoint, ...]:
    """`first`, then the endpoints of `rest` not in it (in `rest`'s order), cut to `count`."""
    if len(first) >= count:
        return first[:count]
    taken = set(first)
    out = list(first)
    for endpoint in rest:
        if endpoint not in taken:
            out.append(endpoint)
            taken.add(endpoint)
            if len(out) == count:
                break
    return tuple(out)


def by_weight(candidates: Iterable[tuple[Endpoint, int]]) -> list[Endpoint]:
    """Endpoints by descending weight (ties in candidate order); weight 0 left out while a positive
    weight exists (weight 0 is drained: it answers only when nothing else can)."""
    pairs = list(candidates)
    if any(w > 0 for _, w in pairs):
        pairs = [(e, w) for e, w in pairs if w > 0]
    return [e for e, _ in sorted(pairs, key=lambda p: -p[1])]
