"""Pure resolution: from the configuration and a health snapshot to the answer for any question.

`view.py` holds the answer model and `build_view`; names that other subsystems add to a zone (multi-site
publication, locality levels) live in modules of their own beside it and are merged by `build_view`.
"""

from gslbd.answer.view import (
    SERVICE_TYPES,
    Answer,
    Dynamic,
    NameData,
    Negative,
    Outcome,
    Records,
    Rr,
    View,
    all_down_outcome,
    build_view,
    fallback_outcome,
    family_candidates,
    render,
    service_outcome,
    soa_rr,
    variant_records,
)

__all__ = [
    "SERVICE_TYPES",
    "Answer",
    "Dynamic",
    "NameData",
    "Negative",
    "Outcome",
    "Records",
    "Rr",
    "View",
    "all_down_outcome",
    "build_view",
    "fallback_outcome",
    "family_candidates",
    "render",
    "service_outcome",
    "soa_rr",
    "variant_records",
]
