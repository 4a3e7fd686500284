"""The endpoint overlay through Redis for one instance (part of cluster mode; see cluster.node), as
cluster/admin.py does admin states:

    sync = OverlaySync(keys, link, store, instance_id, on_overlay)
    await sync.on_up(client)   after every (re)connection: write the changes made while Redis was away
                               (HSET/HDEL + PUBLISH), offer the entries known here that Redis has none for
                               (HSETNX: Redis's own win), then take Redis's (HGETALL <prefix>endpoints)
    await sync.flush()         write the changes saved here now (App.change_endpoints awaits it)
    sync.on_message(data)      a change made at another instance: applied through `on_overlay`

A message names the instance that sent it; an instance ignores its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from gslbd.cluster.keys import ClusterKeys
from gslbd.cluster.link import REDIS_FAILURES, RedisLink
from gslbd.cluster.store import RedisStateStore
from gslbd.model.overlay import OverlayEntry, entry_json, entry_of
from gslbd.model.service import EndpointKey
from gslbd.state.store import decode_key, encode_key

log = logging.getLogger(__name__)

OverlayFeed = Callable[[Mapping[EndpointKey, OverlayEntry | None]], None]


def encode_update(key: EndpointKey, entry: OverlayEntry | None, sender: str) -> str:
    value = None if entry is None else entry_json(entry)
    return json.dumps(
        {"fqdn": key[0], "address": key[1], "entry": value, "from": sender}, separators=(",", ":")
    )


def decode_update(text: str | bytes) -> tuple[EndpointKey, OverlayEntry | None, str] | None:
    """(key, entry or None, sender) of a message, or None when it is not one."""
    try:
        data = json.loads(text)
        fqdn, address, sender = data["fqdn"], data["address"], data["from"]
        if not (isinstance(fqdn, str) and isinstance(address, str) and isinstance(sender, str)):
            return None
        value = data["entry"]
        return (fqdn, address), None if value is None else entry_of(value), sender
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        return None


def parse_hash(entries: Mapping[str, str]) -> dict[EndpointKey, OverlayEntry]:
    """The overlay hash by endpoint key; fields or values that do not parse are skipped (logged)."""
    out: dict[EndpointKey, OverlayEntry] = {}
    for name, value in entries.items():
        try:
            out[decode_key(name)] = entry_of(json.loads(value))
        except ValueError as exc:
            log.warning("cluster: endpoint overlay entry %r in Redis left out: %s", name, exc)
    return out


class OverlaySync:
    """See the module docstring."""

    def __init__(
        self,
        keys: ClusterKeys,
        link: RedisLink,
        store: RedisStateStore,
        instance_id: str,
        on_overlay: OverlayFeed | None,
    ) -> None:
        self.keys = keys
        self.link = link
        self.store = store
        self._id = instance_id
        self._on_overlay = on_overlay
        self._lock = asyncio.Lock()

    async def on_up(self, client: Redis) -> None:
        _, generation = self.link.current()
        async with self._lock:
            pending = self.store.overlay_pending()
            known = self.store.load_overlay()
            try:
                async with self.link.deadline(), client.pipeline(transaction=False) as pipe:
                    self._queue(pipe, pending)
                    for key, entry in known.items():
                        if key not in pending:
                            pipe.hsetnx(self.keys.endpoints, encode_key(key), json.dumps(entry_json(entry)))
                    pipe.hgetall(self.keys.endpoints)
                    results = await pipe.execute()
            except REDIS_FAILURES as exc:
                self.link.failed("endpoints", exc, generation)
                return
            self.store.overlay_flushed(pending)
            changed = self.store.merge_remote_overlay(parse_hash(results[-1]))
        if changed:
            self._changed(changed)

    async def flush(self) -> None:
        """Write the overlay changes saved here to Redis now; with Redis down they wait for the
        reconnect (this never raises for Redis trouble)."""
        async with self._lock:
            client, generation = self.link.current()
            pending = self.store.overlay_pending()
            if client is None or not pending:
                return
            try:
                async with self.link.deadline(), client.pipeline(transaction=False) as pipe:
                    self._queue(pipe, pending)
                    await pipe.execute()
            except REDIS_FAILURES as exc:
                self.link.failed("endpoints", exc, generation)
                return
            self.store.overlay_flushed(pending)

    def on_message(self, data: str) -> None:
        update = decode_update(data)
        if update is None or update[2] == self._id:
            return
        key, entry, _ = update
        if self.store.apply_remote_overlay(key, entry):
            self._changed({key: entry})

    def _queue(self, pipe: Pipeline, changes: Mapping[EndpointKey, OverlayEntry | None]) -> None:
        for key, entry in changes.items():
            field = encode_key(key)
            if entry is None:
                pipe.hdel(self.keys.endpoints, field)
            else:
                pipe.hset(self.keys.endpoints, field, json.dumps(entry_json(entry)))
            pipe.publish(self.keys.endpoints_updates, encode_update(key, entry, self._id))

    def _changed(self, changes: Mapping[EndpointKey, OverlayEntry | None]) -> None:
        if self._on_overlay is None:
            return
        try:
            self._on_overlay(changes)
        except Exception:
            log.exception("cluster: applying an endpoint overlay change failed")
