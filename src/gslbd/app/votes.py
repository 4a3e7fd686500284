"""The quorum's votes as metrics: `gslbd_quorum_votes{service,address,verdict}` (peers.quorum).

Per endpoint voted on, how many sites (this one and the fresh peers) see it down and up now
(state/quorum.py `tally`). Updated after a committed rebuild for the services it touched (all of them
after a reload or a partition change); the labels are bounded by the configured endpoints.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping

from gslbd.metrics import QUORUM_VOTES
from gslbd.model.service import EndpointKey
from gslbd.state.book import HealthBook
from gslbd.state.quorum import tally


class VoteGauges:
    """The vote gauges of the endpoints voted on."""

    def __init__(self) -> None:
        self._keys: dict[str, list[EndpointKey]] = {}

    def configure(self, owners: Mapping[EndpointKey, str]) -> None:
        """The endpoints voted on now; the gauges of the others go."""
        before = {k for keys in self._keys.values() for k in keys}
        self._keys = {}
        for key in owners:
            self._keys.setdefault(key[0], []).append(key)
        for service, address in before - set(owners):
            for verdict in ("down", "up"):
                with contextlib.suppress(KeyError):
                    QUORUM_VOTES.remove(service, address, verdict)

    def update(self, book: HealthBook, services: Collection[str] | None) -> None:
        """Recount the votes of `services` (None: every service)."""
        raw, peers = book.own_votes, book.peer_votes
        for service in self._keys if services is None else services:
            for key in self._keys.get(service, ()):
                down, up = tally(key, raw, peers)
                QUORUM_VOTES.labels(key[0], key[1], "down").set(down)
                QUORUM_VOTES.labels(key[0], key[1], "up").set(up)
