"""Site names from foreign labels (k8gb geo tags, octoDNS pool names): gslbd sites match [a-z0-9-]+."""

from __future__ import annotations

import re

_BAD = re.compile(r"[^a-z0-9-]+")


def site_name(text: str) -> str:
    """`text` lowercased with every run of other characters made one '-' (empty stays empty)."""
    return _BAD.sub("-", text.strip().lower()).strip("-")
