"""Safety rules at run time: admin changes and reloads refused when they would break a rule
(answer/safety.py decides), forced ones logged, and `gslbd_safety_rule_broken` kept in step with every
committed generation (health is never refused: it is a fact, the gauge and its alert report it)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence

from gslbd.answer.safety import Broken, admin_change, broken_rules, config_change
from gslbd.app.generation import Generation, Resolved
from gslbd.errors import RuleBreach, SafetyRefused
from gslbd.metrics import SAFETY_RULE_BROKEN
from gslbd.model.config import SafetyRule
from gslbd.model.service import EndpointKey
from gslbd.types import AdminState

log = logging.getLogger(__name__)

FORCE_HINT = 'refused; send {"force": true} to apply it anyway'


def _breaches(broken: Sequence[Broken]) -> list[RuleBreach]:
    return [RuleBreach(b.rule.name, b.message(), b.services) for b in broken]


def _forced(what: str, broken: Sequence[Broken]) -> None:
    for b in broken:
        log.warning(
            "%s forced although %s",
            what,
            b.message(),
            extra={"event": "safety", "rule": b.rule.name, "services": list(b.services), "forced": True},
        )


def check_admin(generation: Generation, overrides: Mapping[EndpointKey, AdminState], force: bool) -> None:
    """SafetyRefused when setting `overrides` would break a rule of the committed config (unless
    `force`: then each broken rule is logged at WARNING and the change goes on)."""
    resolved = generation.resolved
    broken = admin_change(
        generation.config.safety, resolved.services, generation.snapshot, overrides, resolved.peer_sites
    )
    if not broken:
        return
    if not force:
        raise SafetyRefused(_breaches(broken))
    what = ", ".join(f"admin state {state.value} of {key[0]} {key[1]}" for key, state in overrides.items())
    _forced(what, broken)


def _config_breaches(generation: Generation, resolved: Resolved) -> list[Broken]:
    """The rules of `resolved`'s config that answering it instead of `generation` would break under the
    current health and admin state."""
    config = resolved.config
    return config_change(
        config.safety,
        generation.resolved.services,
        config.services,
        generation.snapshot,
        generation.resolved.peer_sites,
        resolved.peer_sites,
    )


def check_endpoints(generation: Generation, resolved: Resolved, force: bool, what: str) -> None:
    """SafetyRefused when answering `resolved` (the config with an endpoint overlay change) would break
    a rule under the current health and admin state (unless `force`: then logged, as `what`)."""
    broken = _config_breaches(generation, resolved)
    if not broken:
        return
    if not force:
        raise SafetyRefused(_breaches(broken))
    _forced(what, broken)


def check_reload(generation: Generation, resolved: Resolved, force: bool) -> list[str]:
    """The error lines of a reload to `resolved` that would break a rule of its config under the
    current health and admin state (empty: none, or forced and logged)."""
    config = resolved.config
    broken = _config_breaches(generation, resolved)
    if not broken:
        return []
    if force:
        _forced(f"reload of {config.source}", broken)
        return []
    return [
        f"{config.source}:{b.rule.line}: safety: {b.message()}; reload {FORCE_HINT}"
        if b.rule.line is not None
        else f"{config.source}: safety: {b.message()}; reload {FORCE_HINT}"
        for b in broken
    ]


def _remove(rules: Sequence[SafetyRule]) -> None:
    """Drop the gauge's series of rules no longer configured."""
    for rule in rules:
        with contextlib.suppress(KeyError):
            SAFETY_RULE_BROKEN.remove(rule.name)


class SafetyGauges:
    """`gslbd_safety_rule_broken{rule}` from the committed generation. Only the services a generation
    changed are counted again (a new config counts all of them)."""

    def __init__(self) -> None:
        self._rules: tuple[SafetyRule, ...] = ()
        self._config: object = None
        self._broken: dict[int, set[str]] = {}

    def update(self, generation: Generation) -> None:
        config = generation.config
        rules = config.safety
        if rules != self._rules:
            _remove(self._rules)
            self._rules, self._broken = rules, {}
        if not rules:
            self._config = config
            return
        resolved, snapshot = generation.resolved, generation.snapshot
        changed = generation.changed if config is self._config else None
        names = resolved.services.keys() if changed is None else changed
        if changed is None:
            self._broken = {rule.index: set() for rule in rules}
        self._config = config
        for name in names:
            service = resolved.services.get(name)
            short = () if service is None else broken_rules(rules, service, snapshot, resolved.peer_sites)
            for rule in rules:
                below = self._broken.setdefault(rule.index, set())
                if rule in short:
                    below.add(name)
                else:
                    below.discard(name)
        for rule in rules:
            SAFETY_RULE_BROKEN.labels(rule=rule.name).set(1 if self._broken.get(rule.index) else 0)

    def clear(self) -> None:
        _remove(self._rules)
        self._rules, self._broken, self._config = (), {}, None
