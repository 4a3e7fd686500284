"""`services[].min_healthy` (gdnsd multifo's up_thresh): a site whose up endpoints of the asked family fall
below the threshold counts as failed, so its endpoints leave the candidates and the policy answers from
the other sites (failover moves on, all_down is decided over the sites at or above it). When every site
with an up endpoint is below it, every healthy candidate is answered: a threshold never makes an answer
out of a site that has one.

A site's total is its endpoints of the family in the configuration. A peer site's endpoints are learned
over the exchange, which publishes only the up ones: its configured endpoints of the family are its total
when the configuration lists them, else the learned count (then it is never below a share)."""

from __future__ import annotations

from collections import Counter

from gslbd.model.service import Endpoint, Service


def above_threshold(
    service: Service,
    family: tuple[Endpoint, ...],
    healthy: tuple[Endpoint, ...],
    configured: tuple[Endpoint, ...],
) -> tuple[tuple[Endpoint, ...], str]:
    """The healthy candidates of the sites at or above `service.min_healthy` (every healthy candidate when
    no site is) and what the threshold did, for the Outcome's reason ("" when it took nothing out).
    `family`: the candidates of the family (configured here and learned); `configured`: the service's
    configured endpoints of that family."""
    threshold = service.min_healthy
    assert threshold is not None
    up = Counter(e.site for e in healthy)
    listed = Counter(e.site for e in configured)
    present = Counter(e.site for e in family)
    below: dict[str, str] = {}
    for site, count in up.items():
        total = max(listed.get(site, 0) or present[site], count)
        needed = threshold.needed(total)
        if count < needed:
            below[site] = (
                f"site {site} below min_healthy {threshold.text}: {count} of {total} up, needs {needed}"
            )
    if not below:
        return healthy, ""
    why = "; ".join(below.values())
    kept = tuple(e for e in healthy if e.site not in below)
    if kept:
        return kept, why + "; answered from the sites at or above it"
    return healthy, why + "; every site is below it: every healthy candidate is answered"
