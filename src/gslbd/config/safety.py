"""`safety:`: rules that admin changes and reloads must keep (answer/safety.py checks them).

    safety:
      - {min_sites_up: 2, services: "*"}
      - {min_endpoints_up: 1}

Each rule is a mapping with `services` (a glob over service names, default "*") and at least one of
`min_sites_up` and `min_endpoints_up` (integers >= 0).
"""

from __future__ import annotations

from collections.abc import Sequence

from gslbd.config.fields import MapReader, as_map, integer, nonempty_string
from gslbd.model.config import SafetyRule

RULE_KEYS = ("services", "min_sites_up", "min_endpoints_up")


def read_safety(r: MapReader, services: Sequence[str]) -> tuple[SafetyRule, ...]:
    """The rules of the top-level `safety` list (absent: none); every problem located. A glob that
    covers none of `services` (the configured names) is a warning: the rule guards nothing."""
    rules: list[SafetyRule] = []
    for index, (item, path) in enumerate(r.items("safety")):
        rule = as_map(r.rep, item, path)
        if rule is None:
            continue
        rule.check_keys(RULE_KEYS)
        glob = rule.get("services", nonempty_string, "*").strip()
        sites = rule.opt("min_sites_up", integer(lo=0))
        endpoints = rule.opt("min_endpoints_up", integer(lo=0))
        if not rule.has("min_sites_up") and not rule.has("min_endpoints_up"):
            r.rep.error(item.line, path, "a safety rule needs min_sites_up or min_endpoints_up")
            continue
        made = SafetyRule(index, glob, sites, endpoints, line=item.line)
        if services and not any(made.covers(name) for name in services):
            rule.warn("services", f'"{glob}" covers no configured service: the rule guards nothing')
        rules.append(made)
    return tuple(rules)
