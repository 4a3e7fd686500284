"""Counters kept by the DNS transports.

The query path only increments integers here; nothing is logged per query. The metrics endpoint and
`gslbd status` read these counters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

UDP_EVENTS = (
    "udp_queries",
    "udp_responses",
    "udp_dropped",  # the handler chose not to answer (QR set, unreadable header)
    "udp_send_errors",
    "udp_recv_errors",
    "udp_oversized",  # longer than the receive buffer: answered FORMERR (or dropped when not a query)
    "udp_native_answers",  # answered by the C table without calling Python
)
UdpReading = tuple[dict[str, int], int, list[int]]  # (UDP_EVENTS counts, handler errors, rcodes)


class UdpCounters:
    """The counters of one UDP receiving thread (or of one listener on the event loop): only that thread
    writes them, so no increment is lost; `ServerStats` sums every listener's."""

    __slots__ = ("handler_errors", "rcodes", *UDP_EVENTS)

    def __init__(self) -> None:
        self.udp_queries = 0
        self.udp_responses = 0
        self.udp_dropped = 0
        self.udp_send_errors = 0
        self.udp_recv_errors = 0
        self.udp_oversized = 0
        self.udp_native_answers = 0
        self.handler_errors = 0
        self.rcodes = [0] * 16

    def read(self) -> UdpReading:
        return {name: getattr(self, name) for name in UDP_EVENTS}, self.handler_errors, list(self.rcodes)


class ServerStats:
    """Counters of one process's listeners (not a value: it is updated in place).

    TCP counters are plain integers written on the event loop's thread. UDP listeners may run on threads
    of their own, so each keeps its counters apart (`udp_counters()`, or a reader of the C loop's
    counters via `add_udp_source`) and the UDP figures here are their sums, read when asked."""

    __slots__ = (
        "_udp_sources",
        "dnstap_connects",
        "dnstap_dropped",
        "dnstap_written",
        "tcp_connections",
        "tcp_evicted",
        "tcp_handler_errors",
        "tcp_idle_closed",
        "tcp_native_answers",
        "tcp_queries",
        "tcp_rcodes",
        "tcp_responses",
    )

    def __init__(self) -> None:
        self.tcp_connections = 0  # accepted in total
        self.tcp_queries = 0
        self.tcp_responses = 0
        self.tcp_native_answers = 0  # answered by the C table without calling the handler
        self.tcp_idle_closed = 0
        self.tcp_evicted = 0  # closed to make room under the connection cap
        self.tcp_handler_errors = 0  # exceptions raised while answering one TCP message
        # Responses by their 4-bit RCODE (index = rcode; extended rcodes such as BADVERS count as their
        # low bits, which is how they appear in the header).
        self.tcp_rcodes = [0] * 16
        # The dnstap query log (log.dnstap), in exchanges (a query and its response): written to the
        # reader, dropped (queue full, or lost with a broken connection), and connections made.
        self.dnstap_written = 0
        self.dnstap_dropped = 0
        self.dnstap_connects = 0
        self._udp_sources: list[Callable[[], UdpReading]] = []

    def udp_counters(self) -> UdpCounters:
        """New counters for one UDP listener, summed here from now on (also after it closes)."""
        counters = UdpCounters()
        self._udp_sources.append(counters.read)
        return counters

    def add_udp_source(self, read: Callable[[], UdpReading]) -> None:
        """Sum the counters `read` returns (a C UDP loop's) with the others, from now on."""
        self._udp_sources.append(read)

    def _udp(self) -> UdpReading:
        events = dict.fromkeys(UDP_EVENTS, 0)
        errors = 0
        rcodes = [0] * 16
        for read in self._udp_sources:
            counts, handler_errors, by_rcode = read()
            for name, value in counts.items():
                events[name] += value
            errors += handler_errors
            for rcode, value in enumerate(by_rcode):
                rcodes[rcode] += value
        return events, errors, rcodes

    @property
    def udp_queries(self) -> int:
        return self._udp()[0]["udp_queries"]

    @property
    def udp_responses(self) -> int:
        return self._udp()[0]["udp_responses"]

    @property
    def udp_dropped(self) -> int:
        return self._udp()[0]["udp_dropped"]

    @property
    def udp_oversized(self) -> int:
        return self._udp()[0]["udp_oversized"]

    @property
    def udp_native_answers(self) -> int:
        return self._udp()[0]["udp_native_answers"]

    @property
    def udp_rcodes(self) -> list[int]:
        return self._udp()[2]

    @property
    def handler_errors(self) -> int:
        """Exceptions raised while answering one message, UDP and TCP (the message is dropped)."""
        return self.tcp_handler_errors + self._udp()[1]

    def as_dict(self) -> dict[str, int]:
        """The scalar counters (the per-rcode lists are left out; see `responses_by_rcode`)."""
        events, errors, _ = self._udp()
        own = {name: getattr(self, name) for name in self.__slots__ if name.startswith(("tcp_", "dnstap_"))}
        del own["tcp_rcodes"], own["tcp_handler_errors"]
        return {**events, **own, "handler_errors": errors + self.tcp_handler_errors}

    def responses_by_rcode(self) -> dict[tuple[str, int], int]:
        """{(transport, rcode): responses} for every rcode seen."""
        return CounterReport.of(self, {}).responses_by_rcode()


@dataclass(frozen=True, slots=True)
class CounterReport:
    """A process's DNS counters as a plain, picklable value: what a worker process reports to the parent.

    `events`: `ServerStats.as_dict()`; `rcodes`: {transport: 16 counts by rcode}; `policy`: answers decided
    by each policy (`Responder.policy_answers()`).
    """

    events: dict[str, int] = field(default_factory=dict)
    rcodes: dict[str, list[int]] = field(default_factory=dict)
    policy: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls, stats: ServerStats, policy: dict[str, int], guard: dict[str, int] | None = None
    ) -> CounterReport:
        """`guard`: the responder's RRL and cookie counters (`Responder.guard_counts()`), added to events."""
        events = stats.as_dict()
        if guard:
            events.update(guard)
        return cls(events, {"udp": list(stats.udp_rcodes), "tcp": list(stats.tcp_rcodes)}, policy)

    def __add__(self, other: CounterReport) -> CounterReport:
        rcodes = {t: list(c) for t, c in self.rcodes.items()}
        for transport, counts in other.rcodes.items():
            mine = rcodes.setdefault(transport, [0] * len(counts))
            for rcode, count in enumerate(counts):
                mine[rcode] += count
        return CounterReport(_sum(self.events, other.events), rcodes, _sum(self.policy, other.policy))

    def responses_by_rcode(self) -> dict[tuple[str, int], int]:
        """{(transport, rcode): responses} for every rcode seen, as `ServerStats.responses_by_rcode`."""
        return {
            (transport, rcode): count
            for transport, counts in sorted(self.rcodes.items())
            for rcode, count in enumerate(counts)
            if count
        }


def _sum(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for key, value in b.items():
        out[key] = out.get(key, 0) + value
    return out
