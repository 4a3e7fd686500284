"""The endpoint overlay: endpoints added, removed and patched at run time (the API's
`POST/DELETE/PATCH /api/v1/services/{name}/endpoints`), kept on top of the config file, which stays the
source. One entry per endpoint key (service fqdn, normalized address):

    add      `fields` is the endpoint's mapping as the config would hold it (`address` included)
    remove   a config endpoint left out (`fields` empty)
    patch    a config endpoint with some of its keys replaced (`fields`: those keys, e.g. {"weight": 5})

The fields are plain JSON values; config/overlay.py validates them with the config's own endpoint reader
and merges the overlay into a Config. `entry_json` / `entry_of` are the one JSON form of an entry (the
state file's "endpoints" section and cluster mode's Redis hash).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gslbd.model.service import EndpointKey


class OverlayOp(StrEnum):
    ADD = "add"
    REMOVE = "remove"
    PATCH = "patch"

    @property
    def done(self) -> str:
        """ "added", "removed", "patched"."""
        return {"add": "added", "remove": "removed"}.get(self.value, "patched")


@dataclass(frozen=True, slots=True)
class OverlayEntry:
    """One run-time change of one endpoint (see the module docstring). `fields` is never mutated."""

    op: OverlayOp
    fields: Mapping[str, Any] = field(default_factory=dict)


Overlay = Mapping[EndpointKey, OverlayEntry]


def entry_json(entry: OverlayEntry) -> dict[str, Any]:
    """{"op": "add", "endpoint": {...}} | {"op": "remove"} | {"op": "patch", "set": {...}}."""
    if entry.op is OverlayOp.ADD:
        return {"op": "add", "endpoint": dict(entry.fields)}
    if entry.op is OverlayOp.PATCH:
        return {"op": "patch", "set": dict(entry.fields)}
    return {"op": "remove"}


def entry_of(value: object) -> OverlayEntry:
    """The entry of its JSON form; ValueError naming what is wrong."""
    if not isinstance(value, dict):
        raise ValueError('expected {"op": "add" | "remove" | "patch", ...}')
    try:
        op = OverlayOp(str(value.get("op")))
    except ValueError:
        raise ValueError(f"unknown op {value.get('op')!r}; valid: add, remove, patch") from None
    key = {OverlayOp.ADD: "endpoint", OverlayOp.PATCH: "set"}.get(op)
    if key is None:
        return OverlayEntry(op)
    fields = value.get(key)
    if not isinstance(fields, dict) or (op is OverlayOp.ADD and "address" not in fields):
        raise ValueError(
            f"op {op.value} needs a mapping {key!r}" + (" with an address" if key == "endpoint" else "")
        )
    return OverlayEntry(op, dict(fields))
