"""`services[].min_healthy`: a share (0 < x <= 1, or a percentage such as "50%") or a count (an integer
>= 1) of a site's endpoints. One reading of the value for the located validator (config/services.py)
and the fast path (config/fast.py), and one rule for its warning."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection

from gslbd.config.fields import Invalid, describe_value
from gslbd.model.service import Endpoint, MinHealthy

_HELP = (
    "give a share (0 < share <= 1, such as 0.5, or a percentage such as '50%') or a count (an integer >= 1)"
)


def min_healthy_value(value: object) -> MinHealthy:
    """The MinHealthy a plain value (YAML or JSON) gives; Invalid says why not."""
    if isinstance(value, bool):
        raise Invalid(f"expected a share or a count, got {describe_value(value)}; {_HELP}")
    if isinstance(value, int):
        if value < 1:
            raise Invalid(f"a count must be at least 1, got {value}; {_HELP}")
        return MinHealthy(count=value)
    if isinstance(value, float):
        if not (math.isfinite(value) and 0 < value <= 1):
            raise Invalid(f"a share must be more than 0 and at most 1, got {value:g}; {_HELP}")
        return MinHealthy(share=value)
    if isinstance(value, str) and value.strip().endswith("%"):
        text = value.strip()[:-1].strip()
        try:
            percent = float(text)
        except ValueError:
            raise Invalid(f"invalid percentage {value!r}; {_HELP}") from None
        if not (math.isfinite(percent) and 0 < percent <= 100):
            raise Invalid(f"a percentage must be more than 0% and at most 100%, got {value!r}")
        return MinHealthy(share=percent / 100)
    raise Invalid(f"expected a share or a count, got {describe_value(value)}; {_HELP}")


def min_healthy_warning(
    threshold: MinHealthy, endpoints: Collection[Endpoint], peer_sites: Collection[str]
) -> str | None:
    """The warning a count larger than every site's endpoints gets (None when there is none). A peer
    site without configured endpoints of the service is not known here: no warning then."""
    if not threshold.count:
        return None
    per_site = Counter(e.site for e in endpoints)
    if any(site not in per_site for site in peer_sites) or not per_site:
        return None
    most = max(per_site.values())
    if threshold.count <= most:
        return None
    return (
        f"min_healthy {threshold.count} is more than any site has endpoints (at most {most}): every site "
        "counts as below it, so every healthy endpoint is answered"
    )
