"""A real NSD (Debian package nsd) serving a parent zone on a free loopback port, for `gslbd doctor`.

Everything lives in the test's directory: no chroot, no user switch, no database file, no remote
control; `nsd -d` stays in the foreground and is stopped by the test.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rdatatype
from daemon_support import daemon
from gslbd_harness import free_port

STARTUP_TIMEOUT = 15.0


def nsd_binary() -> str | None:
    return shutil.which("nsd", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def nsd_conf(workdir: Path, port: int, origin: str, zonefile: str, server_extra: str = "") -> str:
    return f"""server:
    ip-address: 127.0.0.1@{port}
    port: {port}
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "{workdir}"
    database: ""
    pidfile: "{workdir}/nsd.pid"
    xfrdfile: "{workdir}/xfrd.state"
    zonelistfile: "{workdir}/zone.list"
    xfrdir: "{workdir}"
    logfile: "{workdir}/nsd.log"
    verbosity: 1
    server-count: 1
{server_extra}
remote-control:
    control-enable: no
zone:
    name: "{origin}"
    zonefile: "{zonefile}"
"""


@dataclass
class Nsd:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def running_nsd(workdir: Path, origin: str, zone_text: str, server_extra: str = "") -> Iterator[Nsd]:
    """Serve `zone_text` as `origin` with NSD on 127.0.0.1 (a free port) until the block ends.
    `server_extra`: more lines of the `server:` section (indented by four spaces)."""
    binary = nsd_binary()
    if binary is None:
        raise RuntimeError("nsd is not installed (scripts/test installs the Debian package nsd)")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "parent.zone").write_text(zone_text)
    port = free_port()
    conf = workdir / "nsd.conf"
    conf.write_text(nsd_conf(workdir, port, origin, "parent.zone", server_extra))
    log_path = workdir / "nsd.out"
    with daemon([binary, "-d", "-c", str(conf)], log_path) as proc:
        server = Nsd(proc, port, log_path)
        _wait_until_answering(server, origin)
        yield server


def _wait_until_answering(server: Nsd, origin: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    query = dns.message.make_query(origin, dns.rdatatype.SOA)
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"nsd exited with {server.proc.returncode}:\n{server.log()}")
        try:
            reply = dns.query.udp(query, "127.0.0.1", port=server.port, timeout=0.5)
        except (OSError, dns.exception.DNSException):
            time.sleep(0.05)
            continue
        if reply.answer:
            return
        time.sleep(0.05)
    raise RuntimeError(f"nsd did not answer SOA {origin} within {STARTUP_TIMEOUT}s:\n{server.log()}")
