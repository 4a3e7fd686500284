"""The composition root (see `gslbd.app.core`): App builds and runs one gslbd instance; AppControl is
what the HTTP API sees of it.

The names are loaded on first use, so that `gslbd.app.usable` (what `gslbd check` needs) can be
imported without the server (asyncio, aiohttp, redis, the workers) that `gslbd.app.core` brings."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gslbd.app.control import AppControl
    from gslbd.app.core import ApiBindError, App
    from gslbd.app.startup import privilege_problems, store_for
    from gslbd.app.usable import unusable

__all__ = ["ApiBindError", "App", "AppControl", "privilege_problems", "store_for", "unusable"]

_HOME = {
    "AppControl": "gslbd.app.control",
    "ApiBindError": "gslbd.app.core",
    "App": "gslbd.app.core",
    "privilege_problems": "gslbd.app.startup",
    "store_for": "gslbd.app.startup",
    "unusable": "gslbd.app.usable",
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value
