"""Pure resolution: from the configuration and a health snapshot to the answer for any question.

`view.py` holds the answer model; names that other subsystems add to a zone (multi-site publication,
locality levels) live in modules of their own beside it; `build.py` puts them together (`build_view`),
or rebuilds only what a new snapshot changed (`ViewBuilder`).
"""

from gslbd.answer.build import Change, ViewBuilder, build_view
from gslbd.answer.view import (
    SERVICE_TYPES,
    Answer,
    Chain,
    Dynamic,
    NameData,
    Negative,
    Outcome,
    Records,
    Rr,
    View,
    all_down_outcome,
    fallback_outcome,
    family_candidates,
    negative_soa,
    negative_soa_ttl,
    render,
    service_outcome,
    soa_rr,
    variant_records,
)

__all__ = [
    "SERVICE_TYPES",
    "Answer",
    "Chain",
    "Change",
    "Dynamic",
    "NameData",
    "Negative",
    "Outcome",
    "Records",
    "Rr",
    "View",
    "ViewBuilder",
    "all_down_outcome",
    "build_view",
    "fallback_outcome",
    "family_candidates",
    "negative_soa",
    "negative_soa_ttl",
    "render",
    "service_outcome",
    "soa_rr",
    "variant_records",
]
