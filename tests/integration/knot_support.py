"""A real Knot DNS (Debian package knot, knotd) serving one zone on a free loopback port.

Everything lives in the test's directory: the configuration, the zone file, the journal/timer
databases and the control socket; `knotd -c` stays in the foreground and is stopped by the test.
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


def knotd_binary() -> str | None:
    return shutil.which("knotd", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def knot_conf(workdir: Path, port: int, origin: str, zonefile: str, server_extra: str = "") -> str:
    return f"""server:
    listen: 127.0.0.1@{port}
    rundir: "{workdir}"
    pidfile: "{workdir}/knot.pid"
{server_extra}
control:
    listen: "{workdir}/knot.sock"
log:
  - target: stderr
    any: info
database:
    storage: "{workdir}/db"
template:
  - id: default
    storage: "{workdir}"
    zonefile-sync: -1
    journal-content: none
zone:
  - domain: "{origin}"
    file: "{zonefile}"
"""


@dataclass
class Knot:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def running_knot(workdir: Path, origin: str, zone_text: str, server_extra: str = "") -> Iterator[Knot]:
    """Serve `zone_text` as `origin` with knotd on 127.0.0.1 (a free port) until the block ends.
    `server_extra`: more lines of the `server:` section (indented by four spaces)."""
    binary = knotd_binary()
    if binary is None:
        raise RuntimeError("knotd is not installed (scripts/test installs the Debian package knot)")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "knot.zone").write_text(zone_text)
    port = free_port()
    conf = workdir / "knot.conf"
    conf.write_text(knot_conf(workdir, port, origin, "knot.zone", server_extra))
    log_path = workdir / "knot.out"
    with daemon([binary, "-c", str(conf)], log_path) as proc:
        server = Knot(proc, port, log_path)
        _wait_until_answering(server, origin)
        yield server


def _wait_until_answering(server: Knot, origin: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    query = dns.message.make_query(origin, dns.rdatatype.SOA)
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"knotd exited with {server.proc.returncode}:\n{server.log()}")
        try:
            reply = dns.query.udp(query, "127.0.0.1", port=server.port, timeout=0.5)
        except (OSError, dns.exception.DNSException):
            time.sleep(0.05)
            continue
        if reply.answer:
            return
        time.sleep(0.05)
    raise RuntimeError(f"knotd did not answer SOA {origin} within {STARTUP_TIMEOUT}s:\n{server.log()}")
