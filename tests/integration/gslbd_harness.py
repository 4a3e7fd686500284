"""Start real `python -m gslbd serve` processes on free loopback ports and talk to them.

A config is YAML text with the placeholder @LISTEN@ where the listen list goes, e.g.
`dns: {listen: @LISTEN@}`; the harness picks a port free for UDP and TCP on every host, writes the
file, starts the process, waits until the zone's SOA is answered and kills the process afterwards.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rdatatype
import yaml

STARTUP_TIMEOUT = 30.0


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


def loopback_hosts() -> tuple[str, ...]:
    return ("127.0.0.1", "::1") if has_ipv6_loopback() else ("127.0.0.1",)


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def _candidate_ports() -> list[int]:
    """Ports outside the kernel's ephemeral range, shuffled: an outgoing connection (a probe, a client, a
    Redis link) never takes one of these between our check and the server's bind."""
    low, high = _ephemeral_range()
    ports = [p for p in range(10000, 65536) if not low <= p <= high]
    random.SystemRandom().shuffle(ports)
    return ports


def free_port(hosts: tuple[str, ...] = ("127.0.0.1",)) -> int:
    """A port that is free for both UDP and TCP on every host (checked, then released), chosen outside the
    ephemeral range so that no outgoing socket of this or another test can take it meanwhile."""
    for port in _candidate_ports()[:500]:
        try:
            with contextlib.ExitStack() as stack:
                for host in hosts:
                    family = socket.AF_INET6 if ":" in host else socket.AF_INET
                    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                        s = stack.enter_context(socket.socket(family, kind))
                        if family == socket.AF_INET6:
                            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                        s.bind((host, port))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port found")


def listen_list(hosts: tuple[str, ...], port: int) -> str:
    return "[" + ", ".join(f'"[{h}]:{port}"' if ":" in h else f'"{h}:{port}"' for h in hosts) + "]"


@dataclass
class Running:
    """A gslbd process serving a config on `port` of every host in `hosts`."""

    proc: subprocess.Popen[bytes]
    port: int
    hosts: tuple[str, ...]
    config_path: Path
    log_path: Path
    zone: str
    _stopped: bool = field(default=False)

    @property
    def host(self) -> str:
        return self.hosts[0]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def udp(
        self, query: dns.message.Message, host: str | None = None, timeout: float = 3.0
    ) -> dns.message.Message:
        return dns.query.udp(query, host or self.host, port=self.port, timeout=timeout, ignore_trailing=True)

    def tcp(
        self, query: dns.message.Message, host: str | None = None, timeout: float = 3.0
    ) -> dns.message.Message:
        return dns.query.tcp(query, host or self.host, port=self.port, timeout=timeout)

    def ask(
        self,
        name: str,
        rtype: str = "A",
        *,
        tcp: bool = False,
        host: str | None = None,
        **make: Any,
    ) -> dns.message.Message:
        """Ask (name, rtype) with recursion desired off, by UDP or TCP."""
        query = dns.message.make_query(name, dns.rdatatype.from_text(rtype), **make)
        query.flags &= ~dns.flags.RD
        return self.tcp(query, host) if tcp else self.udp(query, host)

    def send_raw_udp(self, data: bytes, host: str | None = None, timeout: float = 1.0) -> bytes | None:
        """Send bytes as one datagram; the reply's bytes, or None when nothing came back in time."""
        host = host or self.host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.settimeout(timeout)
            s.sendto(data, (host, self.port))
            try:
                reply, _ = s.recvfrom(65535)
            except TimeoutError:
                return None
            return reply

    def dig(self, *args: str, host: str | None = None) -> str:
        """Run the dig binary against this server and return its output."""
        dig = shutil.which("dig")
        if dig is None:
            raise RuntimeError("dig is not installed (scripts/test installs dnsutils)")
        out = subprocess.run(
            [dig, f"@{host or self.host}", "-p", str(self.port), "+norec", "+time=3", "+tries=1", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return out.stdout + out.stderr

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        """Signal the process (group) and wait; its exit code."""
        if not self._stopped:
            self._stopped = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(5)

    def kill(self) -> None:
        """Kill the whole process group (the server and any worker it started)."""
        self._stopped = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


def gslbd_command(*args: str, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "gslbd", *args]


def wait_until_answering(server: Running, timeout: float = STARTUP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    query = dns.message.make_query(server.zone, dns.rdatatype.SOA)
    api = _api_address(server.config_path)  # DNS answers first; the admin API starts right after it
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"gslbd exited with {server.proc.returncode}:\n{server.log()}")
        for host in server.hosts:
            try:
                reply = dns.query.udp(query, host, port=server.port, timeout=0.2)
            except (TimeoutError, OSError, dns.exception.DNSException):
                break
            if not reply.answer:
                break
        else:
            if api is None or _api_accepts(api):
                return
        time.sleep(0.05)
    server.kill()
    raise RuntimeError(f"gslbd did not answer SOA {server.zone} within {timeout}s:\n{server.log()}")


def start_gslbd(
    workdir: Path,
    config_text: str,
    *,
    zone: str,
    hosts: tuple[str, ...] = ("127.0.0.1",),
    name: str = "gslbd",
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    port: int | None = None,
    python: str | None = None,
    open_files: int | None = None,
    wait: bool = True,
) -> Running:
    """Write the config (with @LISTEN@ filled in), start `python -m gslbd serve`, wait for SOA.
    `env`: the process's environment (default this one's); `port`: where it answers (default a free one;
    give it when `--listen` in `extra_args` decides the address); `python`: the interpreter (default
    this one); `open_files`: start it with this open-file limit (soft and hard), as a small machine
    would; `wait`: False returns at once (call `wait_until_answering` before using it, e.g. for a slow
    start that can overlap with other work)."""
    port = free_port(hosts) if port is None else port
    config_path = workdir / f"{name}.yaml"
    config_path.write_text(config_text.replace("@LISTEN@", listen_list(hosts, port)))
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        argv = gslbd_command("serve", "--config", str(config_path), *extra_args, python=python)
        if open_files is not None:  # util-linux prlimit: no preexec_fn in a process with threads
            argv = ["prlimit", f"--nofile={open_files}:{open_files}", "--", *argv]
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kill() reaches workers too
            env=env,
        )
    server = Running(proc, port, hosts, config_path, log_path, zone)
    if wait:
        wait_until_answering(server)
    return server


def _api_address(config_path: Path) -> tuple[str, int] | None:
    """The admin API's (host, port) of a config, when it has one on a fixed port."""
    try:
        loaded = yaml.safe_load(config_path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    api = loaded.get("api") if isinstance(loaded, dict) else None
    listen = api.get("listen") if isinstance(api, dict) else None
    if not isinstance(listen, str) or ":" not in listen:
        return None
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if host == "0.0.0.0" else "::1"
    return (host, int(port)) if port.isdigit() and int(port) else None


def _api_accepts(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=0.2):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def running_gslbd(workdir: Path, config_text: str, **kwargs: Any) -> Iterator[Running]:
    server = start_gslbd(workdir, config_text, **kwargs)
    try:
        yield server
    finally:
        server.kill()
