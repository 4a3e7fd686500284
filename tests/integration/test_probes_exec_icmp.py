"""exec probes run real programs; icmp probes ping loopback (as root: raw socket; else a ping socket)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gslbd_harness import has_ipv6_loopback
from probe_support import endpoint

from gslbd.health.probes import check_privileges, get_probe
from gslbd.health.probes.icmp import NO_PRIVILEGE
from gslbd.model.check import Check
from gslbd.model.service import Endpoint
from gslbd.state.status import ProbeResult
from gslbd.types import CheckType

EXEC = CheckType.EXEC
ICMP = CheckType.ICMP


def run(ep: Endpoint) -> ProbeResult:
    assert ep.check is not None
    return asyncio.run(get_probe(ep.check.type).run(ep, ep.check))


def sh(script: str, **kwargs: object) -> Endpoint:
    return endpoint(type=EXEC, command=("sh", "-c", script), **kwargs)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_exec_exit_0_is_healthy_and_sees_address_and_port() -> None:
    result = run(sh('test "$GSLBD_ADDRESS:$GSLBD_PORT" = "127.0.0.1:8080"', port=8080))
    assert (result.ok, result.detail) == (True, "exit 0")


def test_exec_gets_the_probe_address_and_an_empty_port_when_none_is_set() -> None:
    script = (
        'test "$GSLBD_ADDRESS" = 10.0.0.5 && test -z "$GSLBD_PORT" '
        '&& test "$GSLBD_SERVICE" = app.gslb.example.com.'
    )
    result = run(sh(script, address="backend.example.", probe_address="10.0.0.5"))
    assert (result.ok, result.detail) == (True, "exit 0")


def test_exec_a_nonzero_exit_fails_with_the_first_output_line() -> None:
    result = run(sh("echo; echo 'backend says no' >&2; echo second; exit 3"))
    assert (result.ok, result.detail) == (False, "exit 3: 'backend says no'")


def test_exec_a_program_killed_by_a_signal_says_so() -> None:
    result = run(sh("kill -TERM $$"))
    assert (result.ok, result.detail) == (False, "killed by signal 15")


def test_exec_a_missing_program_fails_clearly() -> None:
    result = run(endpoint(type=EXEC, command=("/nonexistent/check-backend",)))
    assert result.ok is False
    assert result.detail == "cannot run '/nonexistent/check-backend': no such file or directory"


def test_exec_is_killed_with_its_children_at_the_timeout(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    started = time.monotonic()
    result = run(sh(f"sleep 30 & echo $$ $! > {pids}; wait", timeout=0.5))
    assert (result.ok, result.detail) == (False, "timeout after 0.5s")
    assert time.monotonic() - started < 2.0
    shell, child = (int(p) for p in pids.read_text().split())
    deadline = time.monotonic() + 2.0
    while (alive(shell) or alive(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(shell)
    assert not alive(child)


def test_exec_output_beyond_the_cap_does_not_block_the_program() -> None:
    result = run(sh("head -c 1000000 /dev/zero | tr '\\0' x; exit 0"))
    assert (result.ok, result.detail) == (True, "exit 0")


def test_icmp_ping_of_loopback_is_healthy() -> None:
    result = run(endpoint("127.0.0.1", type=ICMP, count=2))
    assert result.ok is True, result.detail
    assert result.detail.startswith("echo reply in ")
    assert result.detail.endswith(" ms")


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no ::1 on this machine")
def test_icmp_ping_of_ipv6_loopback_is_healthy() -> None:
    result = run(endpoint("::1", type=ICMP))
    assert result.ok is True, result.detail
    assert result.detail.startswith("echo reply in ")


def test_icmp_of_a_hostname_endpoint_pings_its_address() -> None:
    result = run(endpoint("localhost.", type=ICMP))
    assert result.ok is True, result.detail


def test_icmp_without_a_reply_fails_after_count_requests() -> None:
    # TEST-NET-2 (RFC 5737): nobody answers there.
    result = run(endpoint("198.51.100.1", type=ICMP, count=2, timeout=0.4))
    assert result.ok is False
    assert result.detail in {"no reply to 2 echo requests", "network is unreachable", "timeout after 0.4s"}


def test_icmp_privileges_are_fine_here_and_the_problem_is_named_without_them() -> None:
    assert check_privileges(Check(name="p", type=ICMP)) is None
    if os.geteuid() != 0:
        pytest.skip("dropping privileges needs root")
    script = (
        "import os\n"
        "from gslbd.health.probes import check_privileges\n"
        "from gslbd.model.check import Check\n"
        "from gslbd.types import CheckType\n"
        "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
        "print(check_privileges(Check(name='p', type=CheckType.ICMP)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ping_group_range").read_text().split())
    if lo <= 65534 <= hi:
        assert out.strip() == "None"  # ping sockets are allowed for nogroup on this machine
    else:
        assert out.strip() == NO_PRIVILEGE


def test_other_check_types_need_no_privileges() -> None:
    for kind in (CheckType.HTTP, CheckType.HTTPS, CheckType.TCP, CheckType.DNS, CheckType.EXEC):
        assert check_privileges(Check(name="p", type=kind)) is None
