"""Sites in network namespaces of their own, joined by emulated links with delay, loss and partitions.

    with site_network(("eu", "us", "ap"), {("eu", "us"): 0.040, ...}, seed=7) as net:
        net.address("eu")                         # "198.18.0.1": eu's address, on each of its links
        with net.entered("eu"):                   # this thread's sockets and children live in eu's namespace
            server = start_gslbd(...)             # the harness, unchanged
        net.link("eu", "us").set(loss=0.01)       # both directions, at run time
        net.link("eu", "us").cut("eu", "us")      # eu -> us dropped, us -> eu still passes
        net.popen("us", ["python3", "-m", "http.server", ...], log)  # `ip netns exec`

Every site is a namespace with one address in 198.18.0.0/15 (the benchmark range: it exists only inside
these namespaces, which have no route out and do not forward). A link between two sites is two veth pairs:
one end in each site (point to point, local site address -> peer site address), the other two ends in a
"switch" namespace where a user-space emulator (one thread, AF_PACKET sockets) copies every frame from
one end to the other after the direction's delay, unless the direction is down or the frame is lost (a
seeded random source per direction, drawn once per frame while the loss is above 0; the links carry IPv4
only and need no ARP, so the frames are exactly the test's traffic). The kernels of these machines have
no sch_netem, hence the emulator; checksum offload is off on every veth end (ethtool) so that copied
frames carry real checksums.
A link taken down or cut drops frames silently, as a real partition does (no ICMP, no carrier change).

Everything is removed when the block ends, however it ends: the emulator stopped, the processes started
with `popen` killed, the namespaces deleted (which deletes their veths). Namespaces left by a test run
that was killed (their pid is gone) are deleted at the next start. `netns_unavailable()` says why this
machine cannot (not root, no `ip`, no `ethtool`, `ip netns add` refused) so that a test can skip.

`losses(default)` is the loss levels a test runs at: `GSLBD_NETNS_LOSS` (percentages, comma separated,
e.g. `GSLBD_NETNS_LOSS=0,1,10`) or `default`; `lossy_polls(loss)` is how many failed polls a bound
allows for at that loss (one per 2.5%, at most 4: a query lost twice, a TCP SYN retransmitted after 1 s).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import heapq
import itertools
import math
import os
import random
import re
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "gslbdt"  # namespace names: gslbdt<pid>-<n>-<site>
CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23  # Linux 4.20; frames we send are filtered by type as well
LOSS_VARIABLE = "GSLBD_NETNS_LOSS"
LOSSY_POLLS = 4


def losses(default: Sequence[float]) -> tuple[float, ...]:
    """The loss levels (shares) to run at: $GSLBD_NETNS_LOSS in percent (e.g. "0,1,10"), or `default`."""
    given = os.environ.get(LOSS_VARIABLE, "").strip()
    if not given:
        return tuple(default)
    return tuple(float(part) / 100 for part in given.split(",") if part.strip())


def loss_id(loss: float) -> str:
    return f"loss{loss * 100:g}"


def lossy_polls(loss: float) -> int:
    """The failed polls a bound allows for at `loss`: one per 2.5% of loss, at most LOSSY_POLLS."""
    return min(LOSSY_POLLS, math.ceil(loss * 40))


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")


@functools.cache
def netns_unavailable() -> str | None:
    """Why sites in network namespaces cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    for tool, package in (("ip", "iproute2"), ("ethtool", "ethtool")):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (scripts/test installs the Debian package {package})"
    name = f"{PREFIX}{os.getpid()}-probe"
    try:
        _run("ip", "netns", "add", name)
    except RuntimeError as error:
        return f"`ip netns add` is refused here: {error}"
    _run("ip", "netns", "del", name)
    return None


def _setns(fd: int) -> None:
    setns = getattr(os, "setns", None)  # Python 3.12+
    if setns is not None:
        setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


@contextlib.contextmanager
def entered_netns(name: str) -> Iterator[None]:
    """Run the block with this thread in namespace `name`: the sockets it creates and the processes it
    starts belong there (and stay there after the block). Other threads are not affected."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{name}", os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(own)


@dataclass
class Direction:
    """One direction of a link: its settings (changeable at any time) and what it did."""

    delay: float
    loss: float
    rng: random.Random
    up: bool = True
    passed: int = 0
    dropped: int = 0

    def admits(self) -> bool:
        """Whether the next frame passes (counted either way)."""
        if not self.up or (self.loss > 0 and self.rng.random() < self.loss):
            self.dropped += 1
            return False
        self.passed += 1
        return True


@dataclass
class Link:
    """The link between sites a and b: `directions[(a, b)]` carries frames from a to b."""

    a: str
    b: str
    directions: dict[tuple[str, str], Direction]

    def set(self, *, delay: float | None = None, loss: float | None = None, up: bool | None = None) -> None:
        """Change both directions (what is not given stays)."""
        for direction in self.directions.values():
            if delay is not None:
                direction.delay = delay
            if loss is not None:
                direction.loss = loss
            if up is not None:
                direction.up = up

    def way(self, source: str, target: str) -> Direction:
        return self.directions[(source, target)]

    def cut(self, source: str, target: str) -> None:
        """Drop every frame from `source` to `target`; the other direction is left as it is."""
        self.way(source, target).up = False

    def down(self) -> None:
        self.set(up=False)

    def restore(self) -> None:
        self.set(up=True)


class Emulator:
    """One thread copying frames between the switch ends of every link, with delay and loss."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._sockets: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="netns-emulator", daemon=True)

    def attach(self, inbound: str, outbound: str, direction: Direction) -> None:
        """Frames arriving at interface `inbound` (of the current namespace) leave by `outbound`."""
        receive, send = (self._packet_socket(name) for name in (inbound, outbound))
        self._selector.register(receive, selectors.EVENT_READ, (direction, send))

    def _packet_socket(self, interface: str) -> socket.socket:
        for existing in self._sockets:
            if existing.getsockname()[0] == interface:
                return existing
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        with contextlib.suppress(OSError):
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        sock.bind((interface, ETH_P_ALL))
        sock.setblocking(False)
        self._sockets.append(sock)
        return sock

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self._selector.close()
        for sock in self._sockets:
            sock.close()

    def _loop(self) -> None:
        queue: list[tuple[float, int, socket.socket, bytes]] = []
        order = itertools.count()
        while not self._stop.is_set():
            now = time.monotonic()
            wait = min(0.05, queue[0][0] - now) if queue else 0.05
            for key, _ in self._selector.select(max(0.0, wait)):
                direction, send = key.data
                receive: socket.socket = key.fileobj  # type: ignore[assignment]
                while True:
                    try:
                        frame, address = receive.recvfrom(65536)
                    except OSError:  # drained (EAGAIN), or the end went away: the loop goes on
                        break
                    if address[2] == PACKET_OUTGOING or not direction.admits():
                        continue
                    heapq.heappush(queue, (time.monotonic() + direction.delay, next(order), send, frame))
            now = time.monotonic()
            while queue and queue[0][0] <= now:
                _, _, send, frame = heapq.heappop(queue)
                with contextlib.suppress(OSError):  # a full queue on the far end is a lost frame
                    send.send(frame)


@dataclass
class Network:
    """Sites, their addresses and namespaces, the links between them, and what runs inside."""

    tag: str
    sites: tuple[str, ...]
    links: dict[frozenset[str], Link] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def namespace(self, site: str) -> str:
        return f"{self.tag}-{site}"

    @property
    def switch(self) -> str:
        return f"{self.tag}--sw"

    def address(self, site: str) -> str:
        return f"198.18.0.{self.sites.index(site) + 1}"

    def link(self, a: str, b: str) -> Link:
        return self.links[frozenset((a, b))]

    def entered(self, site: str) -> contextlib.AbstractContextManager[None]:
        return entered_netns(self.namespace(site))

    def isolate(self, site: str) -> None:
        """Take every link of `site` down."""
        for link in self.links.values():
            if site in (link.a, link.b):
                link.down()

    def heal(self) -> None:
        """Every link up again in both directions (delay and loss stay)."""
        for link in self.links.values():
            link.restore()

    def socket_in(self, site: str, kind: int = socket.SOCK_DGRAM) -> socket.socket:
        """An IPv4 socket of `site`'s namespace (the caller closes it)."""
        with self.entered(site):
            return socket.socket(socket.AF_INET, kind)

    def popen(self, site: str, argv: Sequence[str], log_path: Path) -> subprocess.Popen[bytes]:
        """Start `argv` in `site`'s namespace by `ip netns exec`, output in `log_path`; killed at the end."""
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.namespace(site), *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, killed but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _remove_leftovers() -> None:
    """Delete the namespaces of earlier runs whose process is gone."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    for line in listed.splitlines():
        match = re.match(rf"({PREFIX}(\d+)-\S+)", line)
        if match and not _alive(int(match.group(2))):
            subprocess.run(["ip", "netns", "del", match.group(1)], capture_output=True, check=False)


_runs = itertools.count(1)


def _offload_off(namespace: str, *interfaces: str) -> None:
    for interface in interfaces:
        _run("ip", "netns", "exec", namespace, "ethtool", "-K", interface, "tx", "off", "rx", "off")


def _mac(link: int, first: bool) -> str:
    """The (locally administered) MAC address of a link's end in its first or second site."""
    return f"02:00:00:{link // 256:02x}:{link % 256:02x}:{1 if first else 2:02x}"


def _build(
    net: Network, emulator: Emulator, delays: Mapping[tuple[str, str], float], loss: float, seed: int
) -> None:
    for name in (net.switch, *(net.namespace(s) for s in net.sites)):
        _run("ip", "netns", "add", name)
        _run("ip", "-n", name, "link", "set", "lo", "up")
        with entered_netns(name):  # IPv4 only: no IPv6 neighbour and router chatter on the links
            for scope in ("all", "default"):
                Path(f"/proc/sys/net/ipv6/conf/{scope}/disable_ipv6").write_text("1\n")
    for number, ((a, b), delay) in enumerate(delays.items(), start=1):
        ways = {
            (src, dst): Direction(delay, loss, random.Random(f"{seed}/{src}->{dst}"))
            for src, dst in ((a, b), (b, a))
        }
        net.links[frozenset((a, b))] = Link(a, b, ways)
        ends = {a: f"l{number}{a}"[:15], b: f"l{number}{b}"[:15]}  # switch ends; site ends are to-<peer>
        for site, peer in ((a, b), (b, a)):
            inside, ns = f"to-{peer}"[:15], net.namespace(site)
            _run("ip", "-n", net.switch, "link", "add", ends[site], "type", "veth", "peer", "name", inside)
            _run("ip", "-n", net.switch, "link", "set", inside, "netns", ns)
            _offload_off(net.switch, ends[site])
            _offload_off(ns, inside)
            _run("ip", "-n", net.switch, "link", "set", ends[site], "promisc", "on", "up")
            local, remote = net.address(site), net.address(peer)
            _run("ip", "-n", ns, "link", "set", inside, "address", _mac(number, site == a))
            _run("ip", "-n", ns, "addr", "add", local, "peer", f"{remote}/32", "dev", inside)
            _run("ip", "-n", ns, "link", "set", inside, "up")
            # No ARP over the emulated link: a one-way cut must cut IP traffic one way, not both
            mac = _mac(number, site != a)
            _run("ip", "-n", ns, "neigh", "replace", remote, "lladdr", mac, "dev", inside, "nud", "permanent")
        with entered_netns(net.switch):
            emulator.attach(ends[a], ends[b], ways[(a, b)])
            emulator.attach(ends[b], ends[a], ways[(b, a)])


@contextlib.contextmanager
def site_network(
    sites: Sequence[str], delays: Mapping[tuple[str, str], float], *, loss: float = 0.0, seed: int = 0
) -> Iterator[Network]:
    """Namespaces for `sites`, a link for every pair of `delays` (one-way seconds; `loss` a share of
    frames lost in each direction, drawn from random sources seeded by `seed`), the emulator running."""
    _remove_leftovers()
    net = Network(f"{PREFIX}{os.getpid()}-{next(_runs)}", tuple(sites))
    emulator = Emulator()
    try:
        _build(net, emulator, delays, loss, seed)
        emulator.start()
        yield net
    finally:
        for proc in net.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        emulator.stop()
        for name in (*(net.namespace(s) for s in net.sites), net.switch):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
