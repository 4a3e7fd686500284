"""A real Unbound resolver for the tests: started on a free loopback port with a stub-zone that sends
the GSLB zone to a gslbd on loopback, queried like any client queries its resolver.

The configuration keeps Unbound self-contained: no chroot, no user switch, no remote control, no DNSSEC
validation (the iterator module only), and `do-not-query-localhost: no` so that it asks loopback.
"""

from __future__ import annotations

import contextlib
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

Stub = int | tuple[str, ...]  # where a stub-zone's queries go: a port on 127.0.0.1, or "host@port"s


def unbound_binary() -> str | None:
    return shutil.which("unbound") or ("/usr/sbin/unbound" if Path("/usr/sbin/unbound").exists() else None)


def unbound_conf(
    workdir: Path, port: int, stub_zone: str, stub_port: int, stub_host: str = "127.0.0.1"
) -> str:
    return f"""server:
    interface: 127.0.0.1@{port}
    port: {port}
    do-ip6: no
    do-not-query-localhost: no
    access-control: 127.0.0.0/8 allow
    chroot: ""
    username: ""
    directory: "{workdir}"
    pidfile: "{workdir}/unbound.pid"
    use-syslog: no
    logfile: ""
    verbosity: 1
    num-threads: 1
    module-config: "iterator"
    prefetch: no
    serve-expired: no
    cache-min-ttl: 0
    minimal-responses: no
remote-control:
    control-enable: no
stub-zone:
    name: "{stub_zone}"
    stub-addr: {stub_host}@{stub_port}
"""


def validating_unbound_conf(
    workdir: Path,
    port: int,
    trust_anchor: str,
    stubs: dict[str, Stub],
    aggressive: bool = False,
    control: bool = False,
) -> str:
    """A validating Unbound (validator + iterator) with one trust anchor (a DS record in presentation
    form) and a stub-zone per zone name -> port on 127.0.0.1 (or a tuple of "host@port" addresses, which
    Unbound picks from per query). With `aggressive`, it answers from cached NSEC records (RFC 8198
    aggressive-nsec); with `aggressive` or `control` it takes `unbound-control` on a socket in `workdir`
    (for `Resolver.stats` and `Resolver.control`)."""
    base = unbound_conf(workdir, port, "invalid.", 9).split("stub-zone:")[0]
    base = base.replace('module-config: "iterator"', 'module-config: "validator iterator"')
    base = base.replace(
        "remote-control:",
        f'    trust-anchor: "{trust_anchor}"\n    val-log-level: 2\n    qname-minimisation: no\n'
        f"    aggressive-nsec: {'yes' if aggressive else 'no'}\n"
        # a stub-zone under a zone Unbound serves itself by default (RFC 6761's test.) is asked instead
        + "".join(f'    local-zone: "{zone}" nodefault\n' for zone in stubs)
        + "remote-control:",
    )
    if aggressive or control:
        base = base.replace(
            "    control-enable: no",
            f'    control-enable: yes\n    control-interface: "{workdir}/control.sock"\n'
            "    control-use-cert: no",
        )
        base = base.replace(
            "    verbosity: 1",
            "    verbosity: 1\n    extended-statistics: yes",
        )
    stanzas = "".join(
        f'stub-zone:\n    name: "{zone}"\n'
        + "".join(f"    stub-addr: {a}\n" for a in ((f"127.0.0.1@{to}",) if isinstance(to, int) else to))
        for zone, to in stubs.items()
    )
    return base + stanzas


@contextlib.contextmanager
def running_validating_unbound(
    workdir: Path,
    trust_anchor: str,
    stubs: dict[str, Stub],
    ready_zone: str,
    aggressive: bool = False,
    control: bool = False,
) -> Iterator[Resolver]:
    """Start a validating `unbound -d` (validating_unbound_conf); waits for SOA of `ready_zone`."""
    binary = unbound_binary()
    if binary is None:
        raise RuntimeError("unbound is not installed (scripts/test installs the Debian package unbound)")
    port = free_port()
    conf = workdir / "unbound.conf"
    conf.write_text(validating_unbound_conf(workdir, port, trust_anchor, stubs, aggressive, control))
    log_path = workdir / "unbound.log"
    with daemon([binary, "-d", "-c", str(conf)], log_path) as proc:
        resolver = Resolver(proc, port, log_path)
        _wait_until_answering(resolver, ready_zone)
        yield resolver


@dataclass
class Resolver:
    """A running Unbound on 127.0.0.1:`port`."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def ask(
        self, name: str, rtype: str = "A", timeout: float = 5.0, dnssec: bool = False
    ) -> dns.message.Message:
        """A recursive query (RD set), as a stub resolver sends it; with `dnssec`, DO is set."""
        query = dns.message.make_query(name, dns.rdatatype.from_text(rtype), want_dnssec=dnssec)
        return dns.query.udp(query, "127.0.0.1", port=self.port, timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def control(self, *command: str) -> str:
        """The output of `unbound-control COMMAND...` (a resolver started with `aggressive` or
        `control`)."""
        conf = self.log_path.with_name("unbound.conf")
        return subprocess.run(
            ["unbound-control", "-c", str(conf), *command],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout

    def stats(self) -> dict[str, float]:
        """`unbound-control stats_noreset` (a resolver started with `aggressive`), name -> value."""
        out = self.control("stats_noreset")
        return {k: float(v) for k, _, v in (line.partition("=") for line in out.splitlines()) if v}


def chain(reply: dns.message.Message) -> list[str]:
    """The answer section as "owner TYPE rdata" lines: CNAMEs in order, addresses sorted (Unbound
    rotates RRsets)."""
    out: list[str] = []
    for rrset in reply.answer:
        rdatas = sorted(rd.to_text() for rd in rrset)
        out.extend(f"{rrset.name} {dns.rdatatype.to_text(rrset.rdtype)} {rd}" for rd in rdatas)
    return out


@contextlib.contextmanager
def running_unbound(workdir: Path, stub_zone: str, stub_port: int) -> Iterator[Resolver]:
    """Start `unbound -d` with a stub-zone for `stub_zone` at 127.0.0.1@`stub_port`; stop it after."""
    binary = unbound_binary()
    if binary is None:
        raise RuntimeError("unbound is not installed (scripts/test installs the Debian package unbound)")
    port = free_port()
    conf = workdir / "unbound.conf"
    conf.write_text(unbound_conf(workdir, port, stub_zone, stub_port))
    log_path = workdir / "unbound.log"
    with daemon([binary, "-d", "-c", str(conf)], log_path) as proc:
        resolver = Resolver(proc, port, log_path)
        _wait_until_answering(resolver, stub_zone)
        yield resolver


def _wait_until_answering(resolver: Resolver, zone: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if resolver.proc.poll() is not None:
            raise RuntimeError(f"unbound exited with {resolver.proc.returncode}:\n{resolver.log()}")
        try:
            reply = resolver.ask(zone, "SOA", timeout=0.5)
        except (OSError, dns.exception.DNSException):
            time.sleep(0.05)
            continue
        if reply.answer:
            return
        time.sleep(0.05)
    raise RuntimeError(f"unbound did not answer SOA {zone} within {STARTUP_TIMEOUT}s:\n{resolver.log()}")
