"""`safety:`: rules that admin changes and reloads must keep (answer/safety.py checks them).

    safety:
      - {min_sites_up: 2, services: "*"}
      - {min_endpoints_up: 1}

Each rule is a mapping with `services` (a glob over service names, default "*") and at least one of
`min_sites_up` and `min_endpoints_up` (integers >= 0).
"""

from __future__ import annotations

from gslbd.config.fields import MapReader, as_map, integer, nonempty_string
from gslbd.model.config import SafetyRule

RULE_KEYS = ("services", "min_sites_up", "min_endpoints_up")


def read_safety(r: MapReader) -> tuple[SafetyRule, ...]:
    """The rules of the top-level `safety` list (absent: none); every problem located."""
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
        rules.append(SafetyRule(index, glob, sites, endpoints, line=item.line))
    return tuple(rules)
