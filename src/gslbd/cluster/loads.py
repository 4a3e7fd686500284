"""Load feedback in cluster mode (docs/policies/load.md, docs/cluster.md): one instance fetches an
endpoint's load per interval and every instance answers from the same figures, as raw health results are
shared (cluster/node.py).

    await turn(endpoint)          SET <prefix>loadlock:... NX PX 0.8 x every (and GET the shared figure in
                                  the same round trip). Won: True, fetch here. Lost: False, and when no
                                  figure is shared any more (the key lives 3 x every, STALE_INTERVALS) the
                                  feed gets "no figure" so that `on_missing` applies here as at the fetcher.
                                  sync_mode none or Redis down: True (every instance fetches its own).
    await publish(endpoint, x)    after a good fetch here that won the lock: SET the figure, PUBLISH it
    on_message(data)              another instance's figure -> the feed (our own echo is ignored)
    await seed(endpoints)         at start: each endpoint's shared figure -> the feed

`feed(endpoint, figure | None, why)` is the app's `_on_load`: a figure from Redis steps the load state
exactly as one fetched here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence

from gslbd.cluster.keys import ClusterKeys, millis
from gslbd.cluster.link import REDIS_FAILURES, RedisLink
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.policy.load import STALE_INTERVALS

log = logging.getLogger(__name__)

LoadFeed = Callable[[Endpoint, float | None, str], None]
LOCK_SHARE = 0.8  # of load.every: the fetch lock's TTL (the next fetch comes after 0.9 x every at least)
NOT_SHARED = "no load figure shared in Redis"


def encode_load_update(zone: str, fqdn: str, address: str, figure: float, sender: str) -> str:
    return json.dumps(
        {"zone": zone, "fqdn": fqdn, "address": address, "load": figure, "from": sender},
        separators=(",", ":"),
    )


def decode_load_update(data: str) -> tuple[str, str, str, float, str] | None:
    """(zone, fqdn, address, figure, sender), or None for a message that is not one."""
    try:
        value = json.loads(data)
        fields = (value["zone"], value["fqdn"], value["address"], value["load"], value["from"])
    except (ValueError, KeyError, TypeError):
        return None
    zone, fqdn, address, figure, sender = fields
    if not all(isinstance(x, str) for x in (zone, fqdn, address, sender)):
        return None
    if isinstance(figure, bool) or not isinstance(figure, int | float) or not figure >= 0:
        return None
    return zone, fqdn, address, float(figure), sender


def parse_figure(value: object) -> float | None:
    try:
        figure = float(value) if isinstance(value, str | bytes) else None
    except ValueError:
        return None
    return figure if figure is not None and figure >= 0 else None


class LoadShare:
    """See the module docstring."""

    def __init__(self, keys: ClusterKeys, link: RedisLink, instance_id: str, feed: LoadFeed | None) -> None:
        self._keys = keys
        self._link = link
        self._id = instance_id
        self._feed = feed
        self._lock_mode = True
        self._endpoints: dict[EndpointKey, Endpoint] = {}
        self._zones: dict[str, str] = {}
        self._won: set[EndpointKey] = set()

    def update(self, config: Config, endpoints: Sequence[Endpoint], lock_mode: bool) -> None:
        self._lock_mode = lock_mode
        self._zones = {svc.name: svc.zone for svc in config.services}
        self._endpoints = {e.key: e for e in endpoints if e.load is not None and e.service in self._zones}
        self._won &= set(self._endpoints)

    def _names(self, key: EndpointKey) -> tuple[str, str, str]:
        zone = self._zones[key[0]]
        return zone, self._keys.load_lock(zone, *key), self._keys.load(zone, *key)

    async def turn(self, endpoint: Endpoint) -> bool:
        key = endpoint.key
        self._won.discard(key)
        source = endpoint.load
        client, generation = self._link.current()
        if source is None or key not in self._endpoints or client is None:
            return True
        if not self._lock_mode:
            self._won.add(key)  # sync_mode none: everyone fetches and shares
            return True
        _, lock, figure_key = self._names(key)
        try:
            async with self._link.deadline(), client.pipeline(transaction=False) as pipe:
                pipe.set(lock, self._id, nx=True, px=millis(LOCK_SHARE * source.every))
                pipe.get(figure_key)
                won, shared = await pipe.execute()
        except REDIS_FAILURES as exc:
            self._link.failed("load lock", exc, generation)
            return True
        if won:
            self._won.add(key)
            return True
        if parse_figure(shared) is None:  # the fetcher has had no good figure for STALE_INTERVALS
            self._deliver(endpoint, None, NOT_SHARED, "read")
        return False

    async def publish(self, endpoint: Endpoint, figure: float) -> None:
        key = endpoint.key
        source = endpoint.load
        if key not in self._won or source is None or key not in self._endpoints:
            return
        client, generation = self._link.current()
        if client is None:
            return
        zone, _, figure_key = self._names(key)
        message = encode_load_update(zone, key[0], key[1], figure, self._id)
        try:
            async with self._link.deadline(), client.pipeline(transaction=False) as pipe:
                pipe.set(figure_key, repr(figure), px=millis(STALE_INTERVALS * source.every))
                pipe.publish(self._keys.load_updates, message)
                await pipe.execute()
        except REDIS_FAILURES as exc:
            self._link.failed("load write", exc, generation)

    def on_message(self, data: str) -> None:
        found = decode_load_update(data)
        if found is None:
            return
        zone, fqdn, address, figure, sender = found
        endpoint = self._endpoints.get((fqdn, address))
        if sender == self._id or endpoint is None or self._zones.get(fqdn) != zone:
            return
        self._deliver(endpoint, figure, "", "message")

    async def seed(self) -> None:
        client, generation = self._link.current()
        keys = list(self._endpoints)
        if client is None or not keys:
            return
        try:
            async with self._link.deadline(), client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.get(self._names(key)[2])
                values = await pipe.execute()
        except REDIS_FAILURES as exc:
            self._link.failed("load seed", exc, generation)
            return
        for key, value in zip(keys, values, strict=True):
            figure = parse_figure(value)
            if figure is not None:
                self._deliver(self._endpoints[key], figure, "", "seed")

    def _deliver(self, endpoint: Endpoint, figure: float | None, why: str, source: str) -> None:
        """Feed a figure (or its absence) read from Redis; `source` (read, message, seed) for the log."""
        if self._feed is None:
            return
        try:
            self._feed(endpoint, figure, why)
        except Exception:
            log.exception(
                "cluster: feeding a load figure (%s) for %s %s failed",
                source,
                endpoint.service,
                endpoint.address,
            )
