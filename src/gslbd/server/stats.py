"""Counters kept by the DNS transports.

The query path only increments integers here; nothing is logged per query. The metrics endpoint and
`gslbd status` read these counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class ServerStats:
    """Mutable counters of one process's listeners (not a value: it is updated in place)."""

    __slots__ = (
        "dnstap_connects",
        "dnstap_dropped",
        "dnstap_written",
        "handler_errors",
        "tcp_connections",
        "tcp_evicted",
        "tcp_idle_closed",
        "tcp_queries",
        "tcp_rcodes",
        "tcp_responses",
        "udp_dropped",
        "udp_queries",
        "udp_rcodes",
        "udp_recv_errors",
        "udp_responses",
        "udp_send_errors",
    )

    def __init__(self) -> None:
        self.udp_queries = 0
        self.udp_responses = 0
        self.udp_dropped = 0  # the handler chose not to answer (QR set, unreadable header)
        self.udp_send_errors = 0
        self.udp_recv_errors = 0
        self.tcp_connections = 0  # accepted in total
        self.tcp_queries = 0
        self.tcp_responses = 0
        self.tcp_idle_closed = 0
        self.tcp_evicted = 0  # closed to make room under the connection cap
        self.handler_errors = 0  # exceptions raised while answering one message (the message is dropped)
        # Responses by their 4-bit RCODE (index = rcode; extended rcodes such as BADVERS count as their
        # low bits, which is how they appear in the header).
        self.udp_rcodes = [0] * 16
        self.tcp_rcodes = [0] * 16
        # The dnstap query log (log.dnstap), in exchanges (a query and its response): written to the
        # reader, dropped (queue full, or lost with a broken connection), and connections made.
        self.dnstap_written = 0
        self.dnstap_dropped = 0
        self.dnstap_connects = 0

    def as_dict(self) -> dict[str, int]:
        """The scalar counters (the per-rcode lists are left out; see `responses_by_rcode`)."""
        return {name: getattr(self, name) for name in self.__slots__ if not name.endswith("_rcodes")}

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
    def of(cls, stats: ServerStats, policy: dict[str, int]) -> CounterReport:
        return cls(stats.as_dict(), {"udp": list(stats.udp_rcodes), "tcp": list(stats.tcp_rcodes)}, policy)

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
