"""A bulk admin change (`PUT /api/v1/admin`, `gslbd admin set --site eu down`): the endpoints a selector
picks, the admin states that change, and the answers of a plain client before and after.

    plan(services, snapshot, selector, state) -> BulkPlan     pure: which endpoints, which change
    candidate_view(generation, overrides)                      the view the change would answer from
    answer_changes(before, after, services)                    the services whose plain answer changes

The App applies a plan in one generation (App.set_admin_bulk); a dry run builds the candidate view and
changes nothing.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gslbd.answer import View
from gslbd.app.generation import Generation, GenerationBuilder
from gslbd.app.whatif import SelectorMatchesNothing, with_admin
from gslbd.explain import rr_text
from gslbd.model.selector import Selector
from gslbd.model.service import EndpointKey, Service
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState, EndpointKind

# The client a plain answer is asked for: no ECS, an address no topology is likely to place.
PLAIN_CLIENT = "192.0.2.1"
_PLAIN_IP = int(ipaddress.ip_address(PLAIN_CLIENT))
_RCODES = {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN"}


@dataclass(frozen=True, slots=True)
class BulkPlan:
    """`matched`: every endpoint the selector picks; `changes`: those whose admin state is not `state`
    now (what is set, saved and logged)."""

    selector: Selector
    state: AdminState
    matched: tuple[EndpointKey, ...]
    changes: dict[EndpointKey, AdminState] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BulkResult:
    """An applied (or dry-run) plan: the generation answering after it and the views before and after."""

    plan: BulkPlan
    generation: int
    before: View
    after: View

    def json(self, services: Mapping[str, Service], dry_run: bool) -> dict[str, Any]:
        changed = self.plan.changes
        return {
            "dry_run": dry_run,
            "selector": self.plan.selector.json(),
            "state": self.plan.state.value,
            "generation": self.generation,
            "matched": len(self.plan.matched),
            "changed": [{"service": k[0], "address": k[1], "state": v.value} for k, v in changed.items()],
            "answers": answer_changes(self.before, self.after, touched(services, changed)),
        }


def plan(services: Iterable[Service], snapshot: Snapshot, selector: Selector, state: AdminState) -> BulkPlan:
    """The plan of setting `state` on every endpoint of `services` that `selector` picks.
    SelectorMatchesNothing when it picks none."""
    matched = [e for s in services for e in s.endpoints if selector.matches(e)]
    if not matched:
        raise SelectorMatchesNothing(f"selector {selector.text()} matches no endpoint")
    changes = {e.key: state for e in matched if snapshot.admin.get(e.key, e.admin) is not state}
    return BulkPlan(selector, state, tuple(e.key for e in matched), changes)


def candidate_view(generation: Generation, overrides: Mapping[EndpointKey, AdminState]) -> View:
    """The view a generation with `overrides` on top of its admin states would answer from (built
    apart: the committed generation is not touched)."""
    after = with_admin(generation.snapshot, overrides)
    return GenerationBuilder().first(generation.resolved, after).view


def _types(service: Service) -> list[str]:
    kinds = {e.kind for e in service.endpoints}
    out = ["A"] if EndpointKind.IPV4 in kinds or EndpointKind.HOSTNAME in kinds or not kinds else []
    return out + (["AAAA"] if EndpointKind.IPV6 in kinds else [])


def _answer(view: View, name: str, rtype: str) -> dict[str, Any]:
    answer = view.resolve(name, rtype, _PLAIN_IP, False, random.Random(0), 0)
    return {
        "rcode": _RCODES.get(answer.rcode, str(answer.rcode)),
        "answer": [rr_text(rr) for rr in answer.answer],
    }


def answer_changes(before: View, after: View, services: Sequence[Service]) -> list[dict[str, Any]]:
    """For each of `services` and record type whose answer to a plain client differs between the two
    views: {"service", "type", "before": {"rcode", "answer"}, "after": {...}}."""
    out: list[dict[str, Any]] = []
    for service in services:
        for rtype in _types(service):
            was, now = _answer(before, service.name, rtype), _answer(after, service.name, rtype)
            if was != now:
                out.append({"service": service.name, "type": rtype, "before": was, "after": now})
    return out


def touched(services: Mapping[str, Service], keys: Iterable[EndpointKey]) -> list[Service]:
    """The services of `keys`, once each, in the order met."""
    names = dict.fromkeys(key[0] for key in keys)
    return [services[name] for name in names if name in services]
