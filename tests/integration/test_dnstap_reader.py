"""The dnstap query log read by Debian's own dnstap reader (`dnstap`, package
golang-github-dnstap-golang-dnstap-cli): it listens on a unix socket, gslbd connects with the Frame Streams
handshake and writes AUTH_QUERY / AUTH_RESPONSE messages, and the reader prints them as JSON lines."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.rdatatype
import pytest
from daemon_support import daemon
from gslbd_harness import Running, running_gslbd
from health_app_support import wait_until

from gslbd.wire import ctable as ct

ZONE = "gslb.example.com."
APP = f"app.{ZONE}"

pytestmark = pytest.mark.skipif(
    shutil.which("dnstap") is None, reason="dnstap is not installed (scripts/test installs it)"
)


def config(socket: Path, *, workers: int = 1, responses: bool = True) -> str:
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s, workers: {workers}}}
zones: [{{origin: {ZONE}, nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]}}]
services:
  - {{name: {APP}, check: none, endpoints: [{{address: 192.0.2.10}}]}}
log:
  dnstap: {{socket: {socket}, queries: true, responses: {str(responses).lower()}}}
"""


@contextlib.contextmanager
def reader(socket: Path, out: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The dnstap reader on `socket`, printing JSON lines (and its own notes) to `out`."""
    socket.unlink(missing_ok=True)  # a reader that was stopped leaves its socket file behind
    with daemon([str(shutil.which("dnstap")), "-u", str(socket), "-j"], out) as proc:
        wait_until(socket.exists)
        yield proc


def messages(out: Path) -> list[dict[str, Any]]:
    """The dnstap messages the reader printed (its other lines are notes such as "accepted connection")."""
    lines = out.read_text(errors="replace").splitlines() if out.exists() else []
    return [json.loads(line)["message"] for line in lines if line.startswith("{")]


def ask(server: Running, name: str, *, tcp: bool = False) -> list[str]:
    return [rd.to_text() for rrset in server.ask(name, tcp=tcp).answer for rd in rrset]


def kinds_for(out: Path, qname: str) -> list[tuple[str, str]]:
    """(type, protocol) of every message about `qname`."""
    found = []
    for m in messages(out):
        text = m.get("query_message") or m.get("response_message") or ""
        if f";{qname}\t" in text:
            found.append((m["type"], m["socket_protocol"]))
    return sorted(found)


@pytest.mark.parametrize("workers", [1, 2])
def test_reader_prints_auth_query_and_response_for_udp_and_tcp(tmp_path: Path, workers: int) -> None:
    socket, out = tmp_path / "dnstap.sock", tmp_path / "reader.out"
    # With workers, every worker writes its own stream (and logs in JSON like its parent).
    args = ("--log-format", "json") if workers > 1 else ()
    config_text = config(socket, workers=workers)
    with reader(socket, out), running_gslbd(tmp_path, config_text, zone=ZONE, extra_args=args) as server:
        if workers > 1:

            def connected() -> set[int]:
                lines = [json.loads(line) for line in server.log().splitlines()]
                return {
                    r["worker"] for r in lines if r.get("event") == "dnstap" and r["state"] == "connected"
                }

            wait_until(lambda: connected() == set(range(workers)))
        assert ask(server, APP) == ["192.0.2.10"]
        assert ask(server, APP, tcp=True) == ["192.0.2.10"]
        expected = [
            ("AUTH_QUERY", "TCP"),
            ("AUTH_QUERY", "UDP"),
            ("AUTH_RESPONSE", "TCP"),
            ("AUTH_RESPONSE", "UDP"),
        ]
        wait_until(lambda: kinds_for(out, APP) == expected)
        for m in messages(out):
            assert m["socket_family"] == "INET" and m["query_address"] == "127.0.0.1"
            assert m.get("query_port", 0) > 0 or not ct.AVAILABLE  # C's and TCP's entries know the port
            assert m["query_time"].endswith("Z")
            if m["type"] == "AUTH_RESPONSE" and APP in m["response_message"]:
                assert "192.0.2.10" in m["response_message"] and "flags: qr aa" in m["response_message"]
                assert m["response_time"] >= m["query_time"]
        assert json.loads(out.read_text().splitlines()[-1])["identity"] == "eu"


def test_only_queries_when_responses_are_off_and_unanswered_names_are_logged_too(tmp_path: Path) -> None:
    socket, out = tmp_path / "dnstap.sock", tmp_path / "reader.out"
    with reader(socket, out), running_gslbd(tmp_path, config(socket, responses=False), zone=ZONE) as server:
        query = dns.message.make_query(f"nothing.{ZONE}", dns.rdatatype.A)
        assert server.udp(query).rcode() == dns.rcode.NXDOMAIN
        wait_until(lambda: kinds_for(out, f"nothing.{ZONE}") == [("AUTH_QUERY", "UDP")])
        assert {m["type"] for m in messages(out)} == {"AUTH_QUERY"}


def test_gslbd_waits_for_a_late_reader_and_reconnects_after_it_restarts(tmp_path: Path) -> None:
    socket = tmp_path / "dnstap.sock"
    with running_gslbd(tmp_path, config(socket), zone=ZONE) as server:
        # No reader yet: the exchange waits in the bounded queue and answering goes on.
        assert ask(server, f"early.{ZONE}") == []
        first = tmp_path / "first.out"
        with reader(socket, first):
            wait_until(lambda: len(kinds_for(first, f"early.{ZONE}")) == 2)
        # The reader went away (its STOP never came from gslbd); the next writes fail, gslbd reconnects to
        # the new reader by itself.
        second = tmp_path / "second.out"
        with reader(socket, second):

            def logged_again() -> bool:
                ask(server, f"again.{ZONE}")
                return len(kinds_for(second, f"again.{ZONE}")) >= 2

            wait_until(logged_again, timeout=15, step=0.2)
        log = server.log()
        assert "dnstap: cannot write to" in log and log.count("dnstap: writing to") >= 2
