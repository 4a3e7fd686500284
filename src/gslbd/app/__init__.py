"""The composition root (see `gslbd.app.core`): App builds and runs one gslbd instance; AppControl is
what the HTTP API sees of it."""

from gslbd.app.control import AppControl
from gslbd.app.core import ApiBindError, App, unusable
from gslbd.app.startup import privilege_problems, store_for

__all__ = ["ApiBindError", "App", "AppControl", "privilege_problems", "store_for", "unusable"]
