"""What one site knows about one peer site, and how polls change it. Pure: times are passed in.

    answer   a complete poll: the peer's published addresses per service replace the previous view
    failure  a poll that did not complete: the view is kept, the error noted
    evaluate the view counts while fresh; it is stale (counts as no endpoints) when
               - the peer never answered, or
               - its last answer is older than stale_after (monotonic clock), or
               - its heartbeat (the peer's wall clock) is older than stale_after (our wall clock)

A peer without a heartbeat record (a k8gb-style peer) is judged by its answers alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType

_NOTHING: Mapping[str, tuple[str, ...]] = MappingProxyType({})


class Freshness(StrEnum):
    FRESH = "fresh"
    STALE = "stale"


@dataclass(frozen=True, slots=True)
class PeerAnswer:
    """One complete poll: service fqdn -> the addresses the peer publishes (services without any are
    left out), the peer's heartbeat (Unix seconds; None when it publishes none), and who answered."""

    targets: Mapping[str, tuple[str, ...]]
    heartbeat: float | None = None
    nameserver: str = ""
    votes: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _NOTHING)  # service -> votes
    loads: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _NOTHING)  # service -> figures


@dataclass(frozen=True, slots=True)
class PeerState:
    """One peer as this site sees it.

    `targets` is the view of the last complete poll. `last_answer` is monotonic seconds and
    `last_answer_wall` Unix seconds of that poll (None: never). `errors` counts failed queries.
    `failing` is True while the latest poll failed (`last_error` says why). `freshness` and `detail`
    are the verdict of the latest `evaluate`.
    """

    name: str
    targets: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _NOTHING)
    last_answer: float | None = None
    last_answer_wall: float | None = None
    heartbeat: float | None = None
    nameserver: str = ""
    errors: int = 0
    polls: int = 0
    failing: bool = False
    last_error: str = ""
    freshness: Freshness = Freshness.STALE
    detail: str = "no answer yet"
    votes: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _NOTHING)  # peers.quorum
    loads: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _NOTHING)  # load feedback

    @property
    def heard(self) -> bool:
        """Fresh and its latest poll answered: this site hears it now (partition safety)."""
        return self.freshness is Freshness.FRESH and not self.failing

    @property
    def usable(self) -> Mapping[str, tuple[str, ...]]:
        """The targets that count: the view while fresh, nothing while stale."""
        return self.targets if self.freshness is Freshness.FRESH else _NOTHING

    @property
    def endpoint_count(self) -> int:
        """Addresses learned from this peer that count now."""
        return sum(len(v) for v in self.usable.values())

    def answer_age(self, now: float) -> float | None:
        return None if self.last_answer is None else max(0.0, now - self.last_answer)


def on_answer(
    state: PeerState, answer: PeerAnswer, now: float, wall: float, stale_after: float, errors: int = 0
) -> PeerState:
    """A complete poll (`errors` queries of it failed before a retry answered): its view replaces the
    previous one."""
    after = replace(
        state,
        errors=state.errors + errors,
        targets=MappingProxyType(dict(answer.targets)),
        votes=MappingProxyType(dict(answer.votes)),
        loads=MappingProxyType(dict(answer.loads)),
        last_answer=now,
        last_answer_wall=wall,
        heartbeat=answer.heartbeat,
        nameserver=answer.nameserver,
        polls=state.polls + 1,
        failing=False,
        last_error="",
    )
    return evaluate(after, now, wall, stale_after)


def on_failure(
    state: PeerState, error: str, errors: int, now: float, wall: float, stale_after: float
) -> PeerState:
    """A poll that did not complete (`errors` failed queries, `error` the last one): keep the view."""
    after = replace(
        state, errors=state.errors + errors, polls=state.polls + 1, failing=True, last_error=error
    )
    return evaluate(after, now, wall, stale_after)


def evaluate(state: PeerState, now: float, wall: float, stale_after: float) -> PeerState:
    """Judge freshness at (monotonic `now`, Unix `wall`)."""
    freshness, detail = _judge(state, now, wall, stale_after)
    if freshness is state.freshness and detail == state.detail:
        return state
    return replace(state, freshness=freshness, detail=detail)


def _judge(state: PeerState, now: float, wall: float, stale_after: float) -> tuple[Freshness, str]:
    failure = f": {state.last_error}" if state.failing and state.last_error else ""
    if state.last_answer is None:
        return Freshness.STALE, f"no answer yet{failure}"
    age = now - state.last_answer
    if age > stale_after:
        return Freshness.STALE, f"no answer for {age:.0f}s (stale_after {stale_after:g}s){failure}"
    if state.heartbeat is not None and wall - state.heartbeat > stale_after:
        beat = wall - state.heartbeat
        return Freshness.STALE, f"its heartbeat is {beat:.0f}s old (stale_after {stale_after:g}s)"
    if state.failing:
        return Freshness.FRESH, f"last poll failed{failure}; keeping the view of {age:.0f}s ago"
    return Freshness.FRESH, ""
