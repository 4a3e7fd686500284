"""Safety rules (`safety:` in the config): may a change take away what the rules keep?

    count(service, snapshot, peers)                   (sites, endpoints) answerable now
    shortfalls(rule, service, snapshot, peers)        what of a rule a service lacks under a snapshot
    broken_rules(rules, service, snapshot, peers)     the rules a service lacks now (the gauge)
    admin_change(rules, services, before, overrides, peers)
                                                      the rules an admin change would break
    config_change(rules, old, new, snapshot, peers)   the rules a reload to `new` would break

What counts is what the answers count (`counted_endpoints`: the policy's candidates, health and admin
state applied), so "2 sites up" means two sites this instance would answer with. A rule is broken by a
change when, for some service it covers, a minimum that holds before no longer holds after, or one
that was already short gets shorter still: a rule already broken does not block a change that does
not make it worse (an operator can still repair, or take down what is not counted). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gslbd.answer.exchange_names import counted_endpoints
from gslbd.model.config import SafetyRule
from gslbd.model.service import EndpointKey, Service
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState

# A refusal names at most this many services, then how many more.
SHOWN = 5


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A service below one minimum of a rule: `key` "min_sites_up" or "min_endpoints_up", the count
    `before` and `after` the change (the same when nothing changes)."""

    service: str
    key: str
    before: int
    after: int

    def text(self) -> str:
        unit = "site" if self.key == "min_sites_up" else "endpoint"
        plural = "" if self.after == 1 else "s"
        return f"{self.service} would have {self.after} {unit}{plural} up ({self.before} now)"


@dataclass(frozen=True, slots=True)
class Broken:
    """A rule a change would break, and the services it would break it for (in service order)."""

    rule: SafetyRule
    shortfalls: tuple[Shortfall, ...]

    @property
    def services(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.service for s in self.shortfalls))

    def message(self) -> str:
        """e.g. `safety[0] (min_sites_up: 2, services: "*") would be broken: app.example. would have
        1 site up (2 now)`."""
        shown = [s.text() for s in self.shortfalls[:SHOWN]]
        more = len(self.shortfalls) - SHOWN
        if more > 0:
            shown.append(f"and {more} more")
        return f"{self.rule.text()} would be broken: " + "; ".join(shown)


def count(service: Service, snapshot: Snapshot, peers: frozenset[str]) -> tuple[int, int]:
    """(sites with at least one answerable endpoint, answerable endpoints) of `service`."""
    up = counted_endpoints(service, snapshot, peers)
    return len({e.site for e in up}), len(up)


def _figures(rule: SafetyRule, counted: tuple[int, int]) -> list[tuple[str, int, int]]:
    """(key, minimum, count) of each minimum the rule asks."""
    by_key = {"min_sites_up": counted[0], "min_endpoints_up": counted[1]}
    return [(key, minimum, by_key[key]) for key, minimum in rule.minimums()]


def shortfalls(
    rule: SafetyRule, service: Service, snapshot: Snapshot, peers: frozenset[str]
) -> list[Shortfall]:
    """The minimums of `rule` that `service` lacks now (empty when the rule holds or does not cover it)."""
    if not rule.covers(service.name):
        return []
    counted = count(service, snapshot, peers)
    figures = _figures(rule, counted)
    return [Shortfall(service.name, key, have, have) for key, minimum, have in figures if have < minimum]


def broken_rules(
    rules: Sequence[SafetyRule], service: Service, snapshot: Snapshot, peers: frozenset[str]
) -> list[SafetyRule]:
    """The rules `service` falls short of now (counted once for all of them: what the gauge asks)."""
    covering = [rule for rule in rules if rule.covers(service.name)]
    if not covering:
        return []
    counted = count(service, snapshot, peers)
    return [rule for rule in covering if any(have < low for _, low, have in _figures(rule, counted))]


def _compare(
    rules: Sequence[SafetyRule],
    pairs: Iterable[tuple[Service | None, Snapshot, Service, Snapshot]],
    peers: frozenset[str],
    peers_after: frozenset[str],
) -> list[Broken]:
    """The rules broken by going from each (service, snapshot) before to its (service, snapshot) after
    (a service that did not exist before counts as 0 up before: adding one never breaks a rule)."""
    found: dict[int, list[Shortfall]] = {}
    for old, before, new, after in pairs:
        covering = [rule for rule in rules if rule.covers(new.name)]
        if not covering:
            continue
        was = count(old, before, peers) if old is not None else (0, 0)
        now = count(new, after, peers_after)
        for rule in covering:
            wanted = _figures(rule, now)
            had = dict((key, have) for key, _, have in _figures(rule, was))
            for key, minimum, have in wanted:
                if have < minimum and have < had[key]:
                    found.setdefault(rule.index, []).append(Shortfall(new.name, key, had[key], have))
    return [Broken(rule, tuple(found[rule.index])) for rule in rules if rule.index in found]


def admin_change(
    rules: Sequence[SafetyRule],
    services: Mapping[str, Service],
    before: Snapshot,
    overrides: Mapping[EndpointKey, AdminState],
    peers: frozenset[str],
) -> list[Broken]:
    """The rules that setting the admin `overrides` (endpoint key -> state) over `before` would break.
    Only the services the overrides touch are counted: the others do not change."""
    if not rules or not overrides:
        return []
    after = Snapshot(
        version=before.version,
        health=before.health,
        admin={**before.admin, **overrides},
        peer_endpoints=before.peer_endpoints,
        evaluated_at=before.evaluated_at,
    )
    touched = dict.fromkeys(key[0] for key in overrides)
    pairs = [(services[name], before, services[name], after) for name in touched if name in services]
    return _compare(rules, pairs, peers, peers)


def config_change(
    rules: Sequence[SafetyRule],
    old: Mapping[str, Service],
    new: Sequence[Service],
    snapshot: Snapshot,
    peers: frozenset[str],
    peers_after: frozenset[str],
) -> list[Broken]:
    """The rules (the new config's) that answering `new` instead of `old` under the current health and
    admin state (`snapshot`) would break. A service the new config drops is not counted: removing a
    service is not a safety matter."""
    if not rules:
        return []
    pairs = [(old.get(service.name), snapshot, service, snapshot) for service in new]
    return _compare(rules, pairs, peers, peers_after)
