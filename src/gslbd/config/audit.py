"""The `audit` section: `audit: {every: 60s, sample: 100}` runs the cross-site consistency audit inside
the server (gslbd/app/audit.py) every `every`, over `sample` services drawn at random (0 = all)."""

from __future__ import annotations

from gslbd.config.fields import MapReader, duration, integer
from gslbd.model.config import AuditConfig

MIN_EVERY = 1.0  # seconds: a shorter period would spend the server's time asking its peers


def read_audit(r: MapReader | None) -> AuditConfig | None:
    if r is None:
        return None
    r.check_keys(("every", "sample"))
    every = r.get("every", duration(), 60.0)
    sample = r.get("sample", integer(0, 100_000), 100)
    if every < MIN_EVERY:
        r.error("every", f"must be at least {MIN_EVERY:g}s, got {every:g}s")
    return AuditConfig(every=every, sample=sample)
