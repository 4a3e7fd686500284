"""Counter reports of worker processes add up to the totals the parent's /metrics shows."""

from __future__ import annotations

import pickle
import threading

from gslbd.server.stats import CounterReport, ServerStats, UdpCounters


def stats(udp: dict[int, int], tcp: dict[int, int], **events: int) -> ServerStats:
    s = ServerStats()
    listener = s.udp_counters()
    for rcode, n in udp.items():
        listener.rcodes[rcode] = n
    for rcode, n in tcp.items():
        s.tcp_rcodes[rcode] = n
    for name, n in events.items():
        setattr(listener if name.startswith("udp_") else s, name, n)
    return s


def test_reports_of_two_workers_add_up_per_transport_rcode_policy_and_event() -> None:
    a = CounterReport.of(stats({0: 5, 3: 1}, {}, udp_queries=6), {"round_robin": 4})
    b = CounterReport.of(stats({0: 2}, {0: 1}, udp_queries=2, tcp_queries=1), {"round_robin": 1, "geo": 2})
    total = a + b
    assert total.responses_by_rcode() == {("tcp", 0): 1, ("udp", 0): 7, ("udp", 3): 1}
    assert total.policy == {"round_robin": 5, "geo": 2}
    assert (total.events["udp_queries"], total.events["tcp_queries"]) == (8, 1)
    # Adding leaves both operands as they were (a report is a value).
    assert a.responses_by_rcode() == {("udp", 0): 5, ("udp", 3): 1}


def test_an_empty_report_is_the_neutral_element_and_a_report_crosses_a_pipe() -> None:
    a = CounterReport.of(stats({0: 5}, {2: 1}), {"weighted": 3})
    expected = {("udp", 0): 5, ("tcp", 2): 1}
    assert (CounterReport() + a).responses_by_rcode() == a.responses_by_rcode() == expected
    assert pickle.loads(pickle.dumps(a)) == a


def test_udp_counters_of_several_threads_add_up_exactly() -> None:
    """Each receiving thread increments counters of its own; the sum loses nothing."""
    s = ServerStats()
    per_thread = [s.udp_counters() for _ in range(4)]

    def work(counters: UdpCounters) -> None:
        for _ in range(20_000):
            counters.udp_queries += 1
            counters.rcodes[0] += 1

    threads = [threading.Thread(target=work, args=(c,)) for c in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.udp_queries == 80_000
    assert s.as_dict()["udp_queries"] == 80_000
    assert CounterReport.of(s, {}).rcodes["udp"][0] == 80_000


def test_a_report_keeps_dnstap_and_guard_counters_beside_the_udp_sums() -> None:
    s = stats({0: 3}, {}, udp_queries=3, udp_oversized=1, dnstap_written=2, dnstap_dropped=1, tcp_queries=4)
    report = CounterReport.of(s, {}, {"rrl_limited": 5, "cookies_new": 1})
    assert {k: report.events[k] for k in ("udp_queries", "udp_oversized", "tcp_queries")} == {
        "udp_queries": 3,
        "udp_oversized": 1,
        "tcp_queries": 4,
    }
    assert (report.events["dnstap_written"], report.events["dnstap_dropped"]) == (2, 1)
    assert (report.events["rrl_limited"], report.events["cookies_new"]) == (5, 1)
    assert "tcp_rcodes" not in report.events and "handler_errors" in report.events
