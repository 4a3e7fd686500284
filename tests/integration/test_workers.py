"""`dns.workers: 2`: two worker processes share the sockets, follow reloads, and die with their parent."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dns.edns
import dns.message
import dns.query
import dns.rdatatype
import pytest
from dns_config import CONFIG, ZONE
from gslbd_harness import Running, free_port, gslbd_command, running_gslbd
from health_app_support import wait_until

pytestmark = pytest.mark.slow

WORKERS_CONFIG = CONFIG.replace("  tcp_idle_timeout: 1s\n", "  tcp_idle_timeout: 1s\n  workers: 2\n")


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def worker_pids(server: Running) -> list[int]:
    return [p for p in children(server.proc.pid) if "spawn_main" in cmdline(p)]


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may linger when nothing reaps it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def ask_from_many_ports(
    server: Running, name: str, rtype: str, count: int, wait: float = 3.0
) -> list[str | None]:
    """One query from each of `count` fresh sockets (so from `count` source ports); the first record of each
    answer, or None for a query that got no answer within `wait` seconds."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setblocking(False)
            socks.append(s)
        query = dns.message.make_query(name, dns.rdatatype.from_text(rtype))
        wire = query.to_wire()
        for s in socks:
            s.sendto(wire, (server.host, server.port))
        answers: dict[socket.socket, str] = {}
        deadline = time.monotonic() + wait
        while len(answers) < count and time.monotonic() < deadline:
            ready, _, _ = select.select([s for s in socks if s not in answers], [], [], 0.05)
            for s in ready:
                reply = dns.message.from_wire(s.recv(65535))
                answers[s] = reply.answer[0][0].to_text() if reply.answer else ""
        return [answers.get(s) for s in socks]
    finally:
        for s in socks:
            s.close()


API_PORT = free_port()  # chosen outside the ephemeral range, so nothing else takes it meanwhile


@pytest.fixture
def workers_server(tmp_path: Path) -> Iterator[Running]:
    config = WORKERS_CONFIG + f'api: {{listen: "127.0.0.1:{API_PORT}"}}\n'
    with running_gslbd(tmp_path, config, zone=ZONE) as server:
        wait_for_both_workers(server)
        yield server


def wait_for_both_workers(server: Running) -> None:
    """The SOA the harness waits for may come from the first worker while the second still starts:
    wait until the parent says both listen (a worker killed while starting stops the server)."""
    wait_until(lambda: len(worker_pids(server)) == 2 and "DNS answered by 2 worker processes" in server.log())


def test_two_workers_both_answer(workers_server: Running) -> None:
    server = workers_server
    pids = worker_pids(server)
    assert len(pids) == 2
    answers = ask_from_many_ports(server, f"info.{ZONE}", "TXT", 200)
    assert answers == ['"hello from gslbd"'] * 200
    assert server.ask(f"app.{ZONE}", "A", tcp=True).answer[0].ttl == 20

    # Stop one worker: the queries the kernel hands to its socket go unanswered, the others are answered;
    # so each of the two was taking its share.
    # Up to three rounds: on a loaded machine one round once saw every answer (cause not found yet).
    for _ in range(3):
        os.kill(pids[0], signal.SIGSTOP)
        try:
            stalled = ask_from_many_ports(server, f"info.{ZONE}", "TXT", 200, wait=1.0)
        finally:
            os.kill(pids[0], signal.SIGCONT)
        unanswered = stalled.count(None)
        if unanswered:
            break
    assert 0 < unanswered < 200
    assert stalled.count('"hello from gslbd"') == 200 - unanswered
    assert ask_from_many_ports(server, f"info.{ZONE}", "TXT", 200) == ['"hello from gslbd"'] * 200


def test_workers_follow_a_reload(workers_server: Running) -> None:
    server = workers_server
    server.config_path.write_text(server.config_path.read_text().replace("hello from gslbd", "reloaded"))
    server.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    answers: list[str | None] = []
    while time.monotonic() < deadline:
        answers = ask_from_many_ports(server, f"info.{ZONE}", "TXT", 100)
        if answers == ['"reloaded"'] * 100:
            break
        time.sleep(0.1)
    assert answers == ['"reloaded"'] * 100


def kill_a_worker_and_wait_for_its_successor(server: Running) -> None:
    first = worker_pids(server)
    os.kill(first[0], signal.SIGKILL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        now = [p for p in worker_pids(server) if running(p)]
        if len(now) == 2 and first[0] not in now:
            break
        time.sleep(0.1)
    assert len([p for p in worker_pids(server) if running(p)]) == 2


def test_a_dead_worker_is_restarted(workers_server: Running) -> None:
    server = workers_server
    kill_a_worker_and_wait_for_its_successor(server)
    assert "DNS worker 0 exited" in server.log()
    assert ask_from_many_ports(server, f"info.{ZONE}", "TXT", 100) == ['"hello from gslbd"'] * 100


def dns_metrics() -> dict[str, float]:
    """The gslbd_dns_* samples of the parent's /metrics, by their text ("name{labels}" -> value)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{API_PORT}/metrics", timeout=5) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("gslbd_dns_") and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def metrics_reach(expected: dict[str, float], timeout: float = 10.0) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        seen = dns_metrics()
        if all(seen.get(k, 0.0) >= v for k, v in expected.items()) or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


NOERROR_UDP = 'gslbd_dns_queries_total{rcode="NOERROR",transport="udp"}'
NXDOMAIN_UDP = 'gslbd_dns_queries_total{rcode="NXDOMAIN",transport="udp"}'
NOERROR_TCP = 'gslbd_dns_queries_total{rcode="NOERROR",transport="tcp"}'
ROUND_ROBIN = 'gslbd_dns_policy_answers_total{policy="round_robin"}'
SERVICES_UPDATES = 'gslbd_dns_worker_updates_total{kind="services"}'
CONFIG_UPDATES = 'gslbd_dns_worker_updates_total{kind="config"}'


def test_the_parent_metrics_count_the_queries_every_worker_answered(workers_server: Running) -> None:
    server = workers_server
    # From 200 source ports, so the kernel spreads them over both workers.
    assert ask_from_many_ports(server, f"app.{ZONE}", "A", 200).count(None) == 0
    assert all(a == "" for a in ask_from_many_ports(server, f"nothing.{ZONE}", "A", 50))
    for _ in range(3):
        server.ask(f"info.{ZONE}", "TXT", tcp=True)
    seen = metrics_reach({NOERROR_UDP: 200, NXDOMAIN_UDP: 50, NOERROR_TCP: 3, ROUND_ROBIN: 200})
    # The harness's own start-up SOA queries count too, hence >=; the rest was only us.
    assert seen[NOERROR_UDP] >= 200
    assert seen[NXDOMAIN_UDP] == 50
    assert seen[NOERROR_TCP] == 3
    assert seen[ROUND_ROBIN] == 200
    assert seen['gslbd_dns_server_events_total{event="tcp_connections"}'] == 3

    # A worker that dies and is restarted takes nothing away from the totals.
    kill_a_worker_and_wait_for_its_successor(server)
    assert ask_from_many_ports(server, f"app.{ZONE}", "A", 100).count(None) == 0
    later = metrics_reach({NOERROR_UDP: seen[NOERROR_UDP] + 100, ROUND_ROBIN: 300})
    assert later[NOERROR_UDP] >= seen[NOERROR_UDP] + 100
    assert later[ROUND_ROBIN] == 300
    assert later[NXDOMAIN_UDP] == 50


def test_killing_the_parent_stops_the_workers(workers_server: Running) -> None:
    server = workers_server
    pids = worker_pids(server)
    assert len(pids) == 2
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(5)
    deadline = time.monotonic() + 10
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(p) for p in pids)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((server.host, server.port), timeout=1).close()


def test_sigterm_stops_parent_and_workers_with_exit_0(workers_server: Running) -> None:
    server = workers_server
    pids = worker_pids(server)
    assert server.stop(signal.SIGTERM) == 0
    assert not any(running(p) for p in pids)


def test_workers_that_cannot_bind_make_serve_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "unbindable.yaml"
    path.write_text(WORKERS_CONFIG.replace("@LISTEN@", '["192.0.2.1:5399"]'))
    out = subprocess.run(
        gslbd_command("serve", "--config", str(path)), capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 1
    assert "gslbd: cannot listen on 192.0.2.1:5399: worker 0: [Errno 99]" in out.stderr


def test_each_worker_names_itself_in_the_nsid(tmp_path: Path) -> None:
    config = WORKERS_CONFIG.replace("  workers: 2\n", '  workers: 2\n  identity: "ns-w{worker}"\n')
    with running_gslbd(tmp_path, config, zone=ZONE) as server:
        seen: set[bytes] = set()

        def both_named() -> bool:
            # Each query from a fresh socket: the kernel spreads them over the workers that listen.
            query = dns.message.make_query(f"app.{ZONE}", "A", use_edns=0, options=[dns.edns.NSIDOption(b"")])
            reply = dns.query.udp(query, server.host, port=server.port, timeout=2)
            seen.update(o.to_wire() for o in reply.options if o.otype == dns.edns.NSID)
            return len(seen) >= 2

        wait_until(both_named, timeout=30)  # the second worker may still be starting
        assert seen == {b"ns-w1", b"ns-w2"}


def service_line(name: str, address: str) -> str:
    return json.dumps({"name": name, "check": "none", "endpoints": [{"address": address}]}) + "\n"


def test_workers_get_only_the_services_a_services_file_reload_changed(tmp_path: Path) -> None:
    """A reload that changes, adds and removes lines of the services file sends the workers those
    services, not the config: both workers answer the change and the parent counts one `services`
    update and no `config` update."""
    services = tmp_path / "more.jsonl"
    services.write_text(service_line("svc", "192.0.2.50") + service_line("old", "192.0.2.60"))
    config = WORKERS_CONFIG + f'api: {{listen: "127.0.0.1:{API_PORT}"}}\nservices_file: more.jsonl\n'
    with running_gslbd(tmp_path, config, zone=ZONE) as server:
        wait_for_both_workers(server)
        assert ask_from_many_ports(server, f"svc.{ZONE}", "A", 100) == ["192.0.2.50"] * 100
        before = dns_metrics()
        services.write_text(service_line("svc", "192.0.2.51") + service_line("new", "192.0.2.70"))
        server.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: ask_from_many_ports(server, f"svc.{ZONE}", "A", 100) == ["192.0.2.51"] * 100)
        assert ask_from_many_ports(server, f"new.{ZONE}", "A", 100) == ["192.0.2.70"] * 100
        assert ask_from_many_ports(server, f"old.{ZONE}", "A", 100) == [""] * 100  # NXDOMAIN
        after = dns_metrics()
        assert after[SERVICES_UPDATES] == before.get(SERVICES_UPDATES, 0) + 1
        assert after.get(CONFIG_UPDATES, 0) == before.get(CONFIG_UPDATES, 0)
