"""Start a real BIND 9 `named` (Debian package bind9) on a free loopback port as a parent zone primary.

The server holds `example.com.` as a primary zone that accepts RFC 2136 updates signed with one TSIG
key; it does no recursion and has no control channel. Everything lives in a temporary directory.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rdatatype
from gslbd_harness import free_port

PARENT = "example.com."
STARTUP_TIMEOUT = 20.0

ZONE_FILE = """\
$TTL 300
@        IN SOA ns1.example.com. hostmaster.example.com. 1 3600 600 604800 300
@        IN NS  ns1.example.com.
ns1      IN A   127.0.0.1
www      IN A   192.0.2.80
ns-other IN A   192.0.2.53
"""


def find_named() -> str | None:
    return shutil.which("named", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def key_statement(name: str, secret: str, algorithm: str = "hmac-sha256") -> str:
    """A BIND key statement, as `tsig-keygen` writes it."""
    return f'key "{name}" {{\n\talgorithm {algorithm};\n\tsecret "{secret}";\n}};\n'


def new_secret(seed: int) -> str:
    """A base64 secret of 32 bytes, different per seed (tests need no real randomness)."""
    return base64.b64encode(bytes((seed * 31 + i * 7) % 256 for i in range(32))).decode()


@dataclass
class Bind:
    """A running named: where it listens and the key that may update the parent zone."""

    proc: subprocess.Popen[bytes]
    port: int
    workdir: Path
    key_name: str
    secret: str
    host: str = "127.0.0.1"

    @property
    def server(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def key(self) -> str:
        return f"{self.key_name}:{self.secret}"

    def log(self) -> str:
        return (self.workdir / "named.log").read_text(errors="replace")

    def ask(self, name: str, rtype: str) -> dns.message.Message:
        query = dns.message.make_query(name, dns.rdatatype.from_text(rtype))
        query.flags &= ~dns.flags.RD
        return dns.query.tcp(query, self.host, port=self.port, timeout=5)

    def records(self, name: str, rtype: str) -> set[str]:
        """The data of (name, rtype) as the server hands it out: answer, referral or glue."""
        reply = self.ask(name, rtype)
        want = dns.rdatatype.from_text(rtype)
        found: set[str] = set()
        for rrset in [*reply.answer, *reply.authority, *reply.additional]:
            if rrset.rdtype == want and rrset.name.to_text().lower() == name.lower():
                found.update(r.to_text().lower() for r in rrset)
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def named_conf(workdir: Path, port: int, keys: str, key_name: str, options: str = "", extra: str = "") -> str:
    return f"""\
options {{
    {options}
    directory "{workdir}";
    pid-file "{workdir}/named.pid";
    session-keyfile "{workdir}/session.key";
    managed-keys-directory "{workdir}";
    listen-on port {port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    allow-query {{ any; }};
    allow-transfer {{ none; }};
    dnssec-validation no;
    notify no;
}};
controls {{ }};
{keys}
zone "example.com" {{
    type primary;
    file "example.com.zone";
    allow-update {{ key "{key_name}"; }};
}};
{extra}"""


@contextlib.contextmanager
def running_bind(
    workdir: Path, *, extra_keys: dict[str, str] | None = None, options: str = "", extra: str = ""
) -> Iterator[Bind]:
    """named serving the updatable parent zone example.com. on a free 127.0.0.1 port. `extra_keys`
    (name -> secret) are keys the server knows but that may not update the zone; `options` are more
    statements for the options block and `extra` more configuration (zones, servers)."""
    named = find_named()
    if named is None:
        raise RuntimeError("named is not installed (scripts/test installs bind9)")
    key_name, secret = "gslbd-update", new_secret(1)
    keys = key_statement(key_name, secret) + "".join(
        key_statement(n, s) for n, s in (extra_keys or {}).items()
    )
    port = free_port()
    (workdir / "example.com.zone").write_text(ZONE_FILE)
    conf = workdir / "named.conf"
    conf.write_text(named_conf(workdir, port, keys, key_name, options, extra))
    with (workdir / "named.log").open("wb") as log:
        # -g: foreground, log to stderr; -n 1: one worker thread; -4: IPv4 only.
        proc = subprocess.Popen(
            [named, "-g", "-n", "1", "-4", "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT
        )
    bind = Bind(proc, port, workdir, key_name, secret)
    try:
        _wait_for_soa(bind)
        yield bind
    finally:
        bind.stop()


def _wait_for_soa(bind: Bind) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    query = dns.message.make_query(PARENT, dns.rdatatype.SOA)
    while time.monotonic() < deadline:
        if bind.proc.poll() is not None:
            raise RuntimeError(f"named exited with {bind.proc.returncode}:\n{bind.log()}")
        with contextlib.suppress(dns.exception.DNSException, OSError):
            if dns.query.udp(query, bind.host, port=bind.port, timeout=0.3).answer:
                return
        time.sleep(0.05)
    raise RuntimeError(f"named did not answer SOA {PARENT} within {STARTUP_TIMEOUT}s:\n{bind.log()}")
