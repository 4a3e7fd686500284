"""The link emulator of netns_support between two sites in namespaces of their own: UDP round trips take
twice the configured one-way delay, the configured share of datagrams is lost (within a binomial bound),
a link taken down drops everything, a one-way cut drops one direction only, and TCP passes intact."""

from __future__ import annotations

import contextlib
import random
import socket
import statistics
import threading
import time
from collections.abc import Iterator

import pytest
from netns_support import Network, netns_unavailable, site_network

pytestmark = pytest.mark.skipif(netns_unavailable() is not None, reason=str(netns_unavailable()))

PORT = 7007
DELAY = 0.030
SEED = 22


@pytest.fixture
def net() -> Iterator[Network]:
    with site_network(("a", "b"), {("a", "b"): DELAY}, seed=SEED) as network:
        yield network


class Echo:
    """A UDP echo server at `site`'s address, in a thread; counts what it received."""

    def __init__(self, net: Network, site: str) -> None:
        self.received = 0
        self.sock = net.socket_in(site)
        self.sock.bind((net.address(site), PORT))
        self.sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(2048)
            except TimeoutError:
                continue
            self.received += 1
            self.sock.sendto(data, peer)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@contextlib.contextmanager
def echo(net: Network, site: str) -> Iterator[Echo]:
    server = Echo(net, site)
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def client(net: Network, site: str) -> Iterator[socket.socket]:
    sock = net.socket_in(site)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)  # a burst fits: no loss but the link's
        sock.bind((net.address(site), 0))
        yield sock
    finally:
        sock.close()


def round_trip(sock: socket.socket, target: tuple[str, int], timeout: float = 1.0) -> float | None:
    """Seconds for one datagram to come back, or None when it did not within `timeout`."""
    sock.settimeout(timeout)
    began = time.monotonic()
    sock.sendto(b"ping", target)
    try:
        sock.recvfrom(2048)
    except TimeoutError:
        return None
    return time.monotonic() - began


def drain(sock: socket.socket, quiet: float) -> int:
    """Datagrams received until none came for `quiet` seconds."""
    count = 0
    sock.settimeout(quiet)
    with contextlib.suppress(TimeoutError):
        while True:
            sock.recvfrom(2048)
            count += 1
    return count


def send_burst(sock: socket.socket, target: tuple[str, int], count: int) -> None:
    for number in range(count):
        sock.sendto(number.to_bytes(4, "big"), target)
        time.sleep(0.001)  # pacing, so that no socket buffer overflows: the loss measured is the link's


def rtts(sock: socket.socket, target: tuple[str, int], count: int) -> list[float]:
    measured = [round_trip(sock, target) for _ in range(count)]
    assert None not in measured, "a round trip was lost on a link without loss"
    return [m for m in measured if m is not None]


def test_a_round_trip_takes_twice_the_one_way_delay_also_after_a_change_at_run_time(net: Network) -> None:
    with echo(net, "b"), client(net, "a") as sock:
        target = (net.address("b"), PORT)
        rtts(sock, target, 2)  # neighbour discovery (ARP) done
        first = rtts(sock, target, 20)
        net.link("a", "b").set(delay=0.080)
        second = rtts(sock, target, 20)
    median, after = statistics.median(first), statistics.median(second)
    print(
        f"\nRTT with {DELAY * 1000:.0f} ms one way: min {min(first) * 1000:.1f} "
        f"median {median * 1000:.1f} ms; "
        f"with 80 ms: median {after * 1000:.1f} ms"
    )
    assert min(first) >= 2 * DELAY - 0.002 and statistics.median(first) <= 2 * DELAY + 0.015
    assert min(second) >= 0.160 - 0.002 and statistics.median(second) <= 0.160 + 0.015


@pytest.mark.parametrize("loss", (0.01, 0.10))
def test_the_configured_loss_rate_is_lost_in_each_direction_within_a_binomial_bound(
    net: Network, loss: float
) -> None:
    sent = 400
    with echo(net, "b") as server, client(net, "a") as sock:
        target = (net.address("b"), PORT)
        rtts(sock, target, 2)
        before = server.received
        net.link("a", "b").set(loss=loss)
        send_burst(sock, target, sent)
        back = drain(sock, 2 * DELAY + 0.5)
        arrived = server.received - before
    # Binomial: one direction keeps (1 - loss), the round trip (1 - loss)^2; 4 standard deviations
    for kept, share in ((arrived, 1 - loss), (back, (1 - loss) ** 2)):
        sd = (sent * share * (1 - share)) ** 0.5
        print(f"\nloss {loss:g}: {kept}/{sent} kept, expected {sent * share:.0f} +- {4 * sd:.0f}")
        assert abs(kept - sent * share) <= 4 * sd
    # The seeded source decided every frame: replaying its draws gives exactly what arrived
    replay = random.Random(f"{SEED}/a->b")
    assert arrived == sum(replay.random() >= loss for _ in range(sent))
    assert net.link("a", "b").way("a", "b").dropped == sent - arrived


def test_a_link_taken_down_drops_everything_and_passes_again_when_restored(net: Network) -> None:
    with echo(net, "b") as server, client(net, "a") as sock:
        target = (net.address("b"), PORT)
        rtts(sock, target, 2)
        link = net.link("a", "b")
        link.down()
        before = server.received
        send_burst(sock, target, 50)
        assert drain(sock, 2 * DELAY + 0.3) == 0
        assert server.received == before
        assert link.way("a", "b").dropped >= 50
        link.restore()
        assert len(rtts(sock, target, 5)) == 5


def test_a_one_way_cut_drops_that_direction_only(net: Network) -> None:
    with client(net, "a") as at_a, client(net, "b") as at_b:
        to_a, to_b = at_a.getsockname(), at_b.getsockname()
        net.link("a", "b").cut("a", "b")
        send_burst(at_a, to_b, 30)
        send_burst(at_b, to_a, 30)
        assert drain(at_a, 2 * DELAY + 0.3) == 30  # b -> a passes
        assert drain(at_b, 0.1) == 0  # a -> b is cut
        net.link("a", "b").restore()
        send_burst(at_a, to_b, 30)
        assert drain(at_b, 2 * DELAY + 0.3) == 30


def test_tcp_passes_the_emulator_with_valid_checksums(net: Network) -> None:
    payload = bytes(range(256)) * 400  # 100 kB: many full-size segments
    listener = net.socket_in("b", socket.SOCK_STREAM)
    with listener:
        listener.bind((net.address("b"), PORT))
        listener.listen(1)
        listener.settimeout(5)
        sender = net.socket_in("a", socket.SOCK_STREAM)
        with sender:
            sender.settimeout(5)
            sender.connect((net.address("b"), PORT))
            sender.sendall(payload)
            sender.shutdown(socket.SHUT_WR)
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(5)
                got = b""
                while chunk := conn.recv(65536):
                    got += chunk
    assert got == payload
