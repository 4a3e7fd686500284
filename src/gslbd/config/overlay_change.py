"""One change of the endpoint overlay, validated against the config file's services (pure).

    add(config, overlay, service, value)            POST   .../endpoints        {"address": ..., ...}
    remove(config, overlay, service, address)       DELETE .../endpoints/{address}
    patch(config, overlay, service, address, set)   PATCH  .../endpoints/{address}  {"weight": 5, ...}

Each returns the new overlay (a new dict: the one given is not touched) and the problems found (warnings
only), or raises OverlayRefused with the HTTP status the API answers: 404 (no such service or endpoint),
409 (the endpoint exists), 422 (the endpoint does not validate; `problems` lists every one).

`config` is the config as read from its file (without the overlay). Adding the address of a config
endpoint the overlay removed restores it (the other keys given become a patch). A patch value `null`
takes that key back to the config's (or, for an added endpoint, the default); a patch that leaves no key
drops the entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gslbd.config.overlay import errors_of, problem_text, read_endpoint_value, read_patch
from gslbd.errors import Problem
from gslbd.model.config import Config
from gslbd.model.overlay import Overlay, OverlayEntry, OverlayOp
from gslbd.model.service import EndpointKey, Service


class OverlayRefused(Exception):
    """A change refused: `status` (404, 409, 422), the message, and the validation problems (422)."""

    def __init__(self, status: int, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.problems = problems or []


Changed = tuple[dict[EndpointKey, OverlayEntry], EndpointKey, list[Problem]]


def _service(config: Config, name: str) -> Service:
    found = next((s for s in config.services if s.name == name), None)
    if found is None:
        raise OverlayRefused(404, f"no service {name}")
    return found


def _invalid(problems: list[Problem]) -> OverlayRefused:
    texts = "; ".join(problem_text(p) for p in errors_of(problems))
    return OverlayRefused(422, f"not changed: invalid endpoint: {texts}", errors_of(problems))


def _configured(service: Service, address: str) -> bool:
    return any(e.address == address for e in service.endpoints)


def add(config: Config, overlay: Overlay, name: str, value: object) -> Changed:
    """Add the endpoint `value` (a mapping as in `endpoints:`) to service `name`."""
    service = _service(config, name)
    endpoint, problems = read_endpoint_value(config, service, value)
    if endpoint is None:
        raise _invalid(problems)
    assert isinstance(value, dict)
    key = endpoint.key
    out = dict(overlay)
    had = overlay.get(key)
    if _configured(service, endpoint.address):
        if had is None or had.op is not OverlayOp.REMOVE:
            raise OverlayRefused(
                409, f"service {name} has endpoint {endpoint.address} already (in the config)"
            )
        rest = {k: v for k, v in value.items() if k != "address"}
        del out[key]
        if rest:  # restored, with the other keys given as a patch
            return patch(config, out, name, endpoint.address, rest)
        return out, key, problems
    if had is not None:
        raise OverlayRefused(
            409, f"service {name} has endpoint {endpoint.address} already (added by the API)"
        )
    out[key] = OverlayEntry(OverlayOp.ADD, {**value, "address": endpoint.address})
    return out, key, problems


def remove(config: Config, overlay: Overlay, name: str, address: str) -> Changed:
    """Remove endpoint `address` of service `name`: an added one is forgotten, a config one marked."""
    service = _service(config, name)
    key = (service.name, address)
    had = overlay.get(key)
    out = dict(overlay)
    if had is not None and had.op is OverlayOp.ADD:
        del out[key]
        return out, key, []
    if not _configured(service, address):
        raise OverlayRefused(404, f"service {name} has no endpoint {address}")
    if had is not None and had.op is OverlayOp.REMOVE:
        raise OverlayRefused(404, f"service {name} has no endpoint {address} (removed by the API already)")
    out[key] = OverlayEntry(OverlayOp.REMOVE)
    return out, key, []


def patch(config: Config, overlay: Overlay, name: str, address: str, fields: Mapping[str, Any]) -> Changed:
    """Replace keys of endpoint `address` of service `name` (a value null: back to the config's)."""
    service = _service(config, name)
    key = (service.name, address)
    had = overlay.get(key)
    out = dict(overlay)
    if "address" in fields:
        message = "address: the address cannot be patched: remove the endpoint and add another"
        raise OverlayRefused(422, f"not changed: invalid endpoint: {message}")
    if had is not None and had.op is OverlayOp.ADD:
        value = {k: v for k, v in {**had.fields, **fields}.items() if v is not None}
        endpoint, problems = read_endpoint_value(config, service, value)
        if endpoint is None:
            raise _invalid(problems)
        out[key] = OverlayEntry(OverlayOp.ADD, value)
        return out, key, problems
    configured = next((e for e in service.endpoints if e.address == address), None)
    if configured is None or (had is not None and had.op is OverlayOp.REMOVE):
        gone = " (removed by the API)" if configured is not None else ""
        raise OverlayRefused(404, f"service {name} has no endpoint {address}{gone}")
    if not fields:
        raise OverlayRefused(422, 'not changed: nothing to patch: give at least one key, e.g. {"weight": 5}')
    before = dict(had.fields) if had is not None else {}
    combined = {k: v for k, v in {**before, **fields}.items() if v is not None}
    if not combined:  # every key back to the config's
        out.pop(key, None)
        return out, key, []
    endpoint, problems = read_patch(config, service, configured, combined)
    if endpoint is None:
        raise _invalid(problems)
    out[key] = OverlayEntry(OverlayOp.PATCH, combined)
    return out, key, problems
