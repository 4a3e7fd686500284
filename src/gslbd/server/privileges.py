"""Dropping root: a gslbd started as root binds every socket, then becomes `run_as` for good.

    resolve(run_as)          names or ids -> Account (uid, gid, supplementary groups, home); PrivilegeError
                             when the user or group does not exist here
    drop_privileges(run_as)  as root: supplementary groups, gid, then uid (real, effective and saved, so
                             there is no way back); checks that root cannot be regained. Not root: nothing
                             to drop (already that user, or a warning that run_as is ignored).

The caller decides when: after the DNS listeners (or workers) and the API are bound, before the first
probe runs (App.start), and in each DNS worker after it has bound its sockets (server.workers). Probes,
exec checks and every later file access then run as that user. A worker that dies after the drop is
restarted unprivileged: on a port below 1024 it can then bind only with CAP_NET_BIND_SERVICE (the
systemd unit in deploy/systemd grants it).
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
from dataclasses import dataclass

from gslbd.errors import GslbdError
from gslbd.model.config import RunAs

log = logging.getLogger(__name__)


class PrivilegeError(GslbdError):
    """run_as cannot be applied: an unknown user or group, or the switch itself failed."""


@dataclass(frozen=True, slots=True)
class Account:
    """Who `run_as` names, resolved on this machine."""

    user: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    def __str__(self) -> str:
        return f"{self.user} (uid {self.uid}, gid {self.gid})"


def resolve(run_as: RunAs) -> Account:
    """The uid, gid and groups `run_as` names. PrivilegeError when the user or group is unknown here."""
    try:
        entry = pwd.getpwuid(int(run_as.user)) if run_as.user.isdigit() else pwd.getpwnam(run_as.user)
    except (KeyError, OverflowError):
        entry = None
        if not run_as.user.isdigit():
            raise PrivilegeError(f"run_as.user: no user {run_as.user!r} on this machine") from None
    gid = entry.pw_gid if entry is not None else None
    if run_as.group is not None:
        try:
            gid = (
                grp.getgrgid(int(run_as.group)) if run_as.group.isdigit() else grp.getgrnam(run_as.group)
            ).gr_gid
        except (KeyError, OverflowError):
            if not run_as.group.isdigit():
                raise PrivilegeError(f"run_as.group: no group {run_as.group!r} on this machine") from None
            gid = int(run_as.group)
    if gid is None:
        raise PrivilegeError(f"run_as.group is required: uid {run_as.user} has no passwd entry")
    if entry is None:
        return Account(run_as.user, int(run_as.user), gid, (gid,), "/")
    groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, gid))))  # as initgroups(3) would
    return Account(entry.pw_name, entry.pw_uid, gid, groups, entry.pw_dir or "/")


def drop_privileges(run_as: RunAs | None) -> Account | None:
    """Become `run_as` when running as root; the account switched to, or None when nothing changed."""
    if run_as is None:
        return None
    account = resolve(run_as)
    if os.geteuid() != 0:
        if os.geteuid() != account.uid:
            log.warning("run_as %s ignored: not started as root (running as uid %d)", account, os.geteuid())
        return None
    try:
        os.setgroups(list(account.groups))
        os.setresgid(account.gid, account.gid, account.gid)
        os.setresuid(account.uid, account.uid, account.uid)
    except OSError as exc:
        raise PrivilegeError(f"cannot switch to run_as {account}: {exc}") from exc
    if account.uid != 0 and _can_regain_root():
        raise PrivilegeError(f"switched to run_as {account}, but root could be regained")
    os.environ.update(HOME=account.home, USER=account.user, LOGNAME=account.user)
    return account


def _can_regain_root() -> bool:
    try:
        os.setuid(0)
    except OSError:
        return False
    return True
