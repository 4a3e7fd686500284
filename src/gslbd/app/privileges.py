"""App.start's privilege drop: once every socket is bound and before any probe runs, become `run_as`,
then check that the unprivileged process can still do what this config asks of it later."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from gslbd.app.startup import privilege_problems
from gslbd.model.config import Config
from gslbd.server.privileges import Account, PrivilegeError, drop_privileges

log = logging.getLogger(__name__)


def drop_after_bind(config: Config) -> Account | None:
    """Drop to `config.run_as` (when started as root). PrivilegeError when the switch fails or when the
    new user cannot run a configured check or write the state file; a config file it cannot read again
    (SIGHUP) is only warned about."""
    # Where the code comes from, found before the switch: nothing may need importing to find it after.
    code = (os.path.dirname(os.__file__), str(Path(__file__).parents[1]))
    account = drop_privileges(config.run_as)
    if account is None:
        return None
    log.info("bound every socket; now running as %s", account)
    problems = [
        f"run_as user {account.user} cannot read {where!r}: install Python and gslbd where it can read them "
        "(e.g. a virtualenv in /opt/gslbd), not under /root"
        for where in code
        if not os.access(where, os.R_OK | os.X_OK)
    ]
    if problems:  # nothing else can be checked: the next lazy import would fail
        raise PrivilegeError("; ".join(problems))
    problems = [f"after switching to run_as {account}: {p}" for p in privilege_problems(config)]
    state = config.state.file
    if state is not None:
        where = Path(state).parent
        if not os.access(where, os.W_OK | os.X_OK):
            problems.append(
                f"state.file {state!r}: run_as user {account.user} cannot write to {str(where)!r}"
                " (give it the directory, e.g. systemd's StateDirectory=)"
            )
    if problems:
        raise PrivilegeError("; ".join(problems))
    low = sorted({a.port for a in config.dns.listen if 0 < a.port < 1024})
    if config.dns.workers > 1 and low:
        log.warning(
            "a DNS worker that dies from now on cannot be restarted on port %s as %s; the systemd unit "
            "(CAP_NET_BIND_SERVICE) can restart it",
            ", ".join(map(str, low)),
            account.user,
        )
    if not config.source.startswith("<") and not os.access(config.source, os.R_OK):
        log.warning("run_as user %s cannot read %s: a reload (SIGHUP) will fail", account.user, config.source)
    return account
