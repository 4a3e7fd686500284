"""`run_as: {user, group}`: whom a gslbd started as root becomes once its sockets are bound.

The names (or numeric ids) are kept as written; whether they exist is checked here only as a warning,
since a configuration is often checked on another machine than the one that serves it. `gslbd serve`
refuses to start when they do not resolve (gslbd.server.privileges).
"""

from __future__ import annotations

import grp
import pwd

from gslbd.config.fields import Invalid, MapReader, scalar
from gslbd.config.loader import Node
from gslbd.model.config import RunAs


def _account(node: Node) -> str:
    value = scalar(node, "a user or group name, or a numeric id")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise Invalid(f"expected a name or a numeric id, got {value!r}")
    text = str(value).strip()
    if not text:
        raise Invalid("must not be empty")
    return text


def _has_user(name: str) -> bool:
    """Is there a passwd entry for this name or uid?"""
    try:
        pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, OverflowError):
        return False
    return True


def _has_group(name: str) -> bool:
    """A numeric gid needs no group entry."""
    try:
        grp.getgrgid(int(name)) if name.isdigit() else grp.getgrnam(name)
    except (KeyError, OverflowError):
        return name.isdigit()
    return True


def read_run_as(r: MapReader | None) -> RunAs | None:
    if r is None:
        return None
    r.check_keys(("user", "group"))
    user = r.req("user", _account)
    group = r.opt("group", _account)
    if user is None:
        return None
    if not _has_user(user):
        if user.isdigit() and group is None:
            r.error("group", f"required when the user is a uid without a passwd entry ({user})")
        elif not user.isdigit():
            r.warn("user", f"no user {user!r} on this machine: gslbd serve will refuse to start here")
    if group is not None and not _has_group(group):
        r.warn("group", f"no group {group!r} on this machine: gslbd serve will refuse to start here")
    return RunAs(user, group)
