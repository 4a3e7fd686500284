"""run_as names resolve to ids on this machine, or fail with the field at fault (no switch happens here:
dropping root is tested on a real process in tests/integration/test_deploy_systemd.py)."""

from __future__ import annotations

import grp
import os
import pwd

import pytest

from gslbd.model.config import RunAs
from gslbd.server.privileges import PrivilegeError, drop_privileges, resolve


def test_a_user_resolves_with_its_primary_and_supplementary_groups() -> None:
    nobody = pwd.getpwnam("nobody")
    account = resolve(RunAs("nobody"))
    assert (account.user, account.uid, account.gid) == ("nobody", nobody.pw_uid, nobody.pw_gid)
    assert nobody.pw_gid in account.groups
    assert str(account) == f"nobody (uid {nobody.pw_uid}, gid {nobody.pw_gid})"


def test_names_and_numeric_ids_resolve_alike() -> None:
    gid = grp.getgrnam("nogroup").gr_gid
    by_name = resolve(RunAs("nobody", "nogroup"))
    by_id = resolve(RunAs(str(pwd.getpwnam("nobody").pw_uid), str(gid)))
    assert (by_name.uid, by_name.gid) == (by_id.uid, by_id.gid)
    assert resolve(RunAs("4242", "4343")) == resolve(RunAs("4242", "4343"))
    assert (resolve(RunAs("4242", "4343")).uid, resolve(RunAs("4242", "4343")).groups) == (4242, (4343,))


@pytest.mark.parametrize(
    ("run_as", "message"),
    [
        (RunAs("no-such-user-here"), "run_as.user: no user 'no-such-user-here' on this machine"),
        (
            RunAs("nobody", "no-such-group-here"),
            "run_as.group: no group 'no-such-group-here' on this machine",
        ),
        (RunAs("4242"), "run_as.group is required: uid 4242 has no passwd entry"),
    ],
)
def test_unknown_names_fail_with_the_field(run_as: RunAs, message: str) -> None:
    with pytest.raises(PrivilegeError, match=message):
        resolve(run_as)


def test_without_run_as_nothing_changes() -> None:
    assert drop_privileges(None) is None
    assert os.geteuid() == os.geteuid()


def test_as_that_user_already_nothing_changes() -> None:
    me = pwd.getpwuid(os.geteuid())
    if os.geteuid() == 0:
        pytest.skip("as root this would switch the test process itself")
    assert drop_privileges(RunAs(me.pw_name)) is None
