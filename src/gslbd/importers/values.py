"""Foreign values in gslbd's terms: site names (from k8gb geo tags and octoDNS pool names; gslbd sites
match [a-z0-9-]+) and TTLs (gslbd's bound, config/fields.py)."""

from __future__ import annotations

import re

from gslbd.config.fields import TTL_MAX

_BAD = re.compile(r"[^a-z0-9-]+")


def site_name(text: str) -> str:
    """`text` lowercased with every run of other characters made one '-' (empty stays empty)."""
    return _BAD.sub("-", text.strip().lower()).strip("-")


def ttl_seconds(value: object) -> int | None:
    """A TTL from an integer or a string of digits, None when it is not one gslbd takes."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= TTL_MAX else None
