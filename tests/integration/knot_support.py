"""A real Knot DNS (Debian package knot) serving one zone on a free loopback port, to compare with.

Everything lives in the test's directory: no user switch, no control socket; `knotd` runs in the
foreground with the configuration written here and is stopped by the test. `modules` is extra
configuration text (module sections), `zone_modules` the modules of the zone, e.g. "mod-cookies/c", and
`server_extra` more lines of the `server:` section (indented by four spaces).
"""

from __future__ import annotations

import contextlib
import os
import shutil
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


@dataclass
class Knot:
    port: int
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def knot_conf(
    workdir: Path,
    port: int,
    origin: str,
    modules: str,
    zone_modules: tuple[str, ...],
    server_extra: str = "",
) -> str:
    module_line = f"    module: [{', '.join(zone_modules)}]\n" if zone_modules else ""
    extra = server_extra.rstrip("\n") + "\n" if server_extra.strip() else ""
    return (
        f'server:\n    rundir: "{workdir}"\n    listen: 127.0.0.1@{port}\n'
        "    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n"
        f"{extra}"
        f'database:\n    storage: "{workdir}"\n'
        "log:\n  - target: stderr\n    any: info\n"
        f"{modules}"
        f'zone:\n  - domain: {origin}\n    storage: "{workdir}"\n    file: "zone.db"\n{module_line}'
    )


@contextlib.contextmanager
def running_knot(
    workdir: Path,
    origin: str,
    zone_text: str,
    server_extra: str = "",
    *,
    modules: str = "",
    zone_modules: tuple[str, ...] = (),
) -> Iterator[Knot]:
    """Serve `zone_text` as `origin` with knotd on 127.0.0.1 (a free port) until the block ends."""
    binary = knotd_binary()
    if binary is None:
        raise RuntimeError("knotd is not installed (scripts/test installs the Debian package knot)")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "zone.db").write_text(zone_text)
    port = free_port()
    conf = workdir / "knot.conf"
    conf.write_text(knot_conf(workdir, port, origin, modules, zone_modules, server_extra))
    log_path = workdir / "knot.out"
    with daemon([binary, "-c", str(conf)], log_path) as proc:
        server = Knot(port, log_path)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        query = dns.message.make_query(origin, dns.rdatatype.SOA)
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"knotd exited with {proc.returncode}:\n{server.log()}")
            try:
                if dns.query.udp(query, "127.0.0.1", port=port, timeout=0.5).answer:
                    break
            except (OSError, dns.exception.DNSException):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"knotd did not answer SOA {origin} in {STARTUP_TIMEOUT}s:\n{server.log()}"
                )
            time.sleep(0.05)
        yield server
