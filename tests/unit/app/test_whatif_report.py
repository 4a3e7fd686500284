"""The figures of `gslbd whatif` from the answers before and after (app/whatif_report.py)."""

from __future__ import annotations

import ipaddress

from gslbd.app.whatif_report import (
    DROPPED,
    Answer,
    Replayed,
    Share,
    client_network,
    compare,
    report_json,
    report_lines,
)

A = ("app.example.com.", "A")
EU1 = Answer(0, frozenset({(*A, "192.0.2.1")}), ("eu",))
EU12 = Answer(0, frozenset({(*A, "192.0.2.1"), (*A, "192.0.2.2")}), ("eu", "eu"))
US1 = Answer(0, frozenset({(*A, "198.51.100.1")}), ("us",))
NX = Answer(3, frozenset())


def test_client_networks_are_the_slash_24_and_the_slash_56() -> None:
    assert client_network(int(ipaddress.ip_address("10.1.2.3")), False) == "10.1.2.0/24"
    v6 = int(ipaddress.ip_address("2001:db8:1:2ff::1"))
    assert client_network(v6, True) == "2001:db8:1:200::/56"


def test_a_changed_answer_is_another_rcode_or_other_records_not_another_order() -> None:
    assert not Replayed("n", "s", EU12, Answer(0, EU12.records, ("eu", "eu"))).changed
    assert Replayed("n", "s", EU1, EU12).changed
    assert Replayed("n", None, NX, Answer(DROPPED, frozenset())).changed


def test_shares_of_queries_networks_services_and_the_load_per_site() -> None:
    replayed = [
        Replayed("10.1.0.0/24", "app.", EU1, US1),  # changed
        Replayed("10.1.0.0/24", "app.", EU1, EU1),
        Replayed("10.2.0.0/24", "app.", US1, US1),
        Replayed("10.2.0.0/24", "db.", EU12, EU12),
        Replayed("10.3.0.0/24", None, NX, NX),
    ]
    report = compare(replayed)
    assert (report.queries, report.networks, report.services) == (Share(1, 5), Share(1, 3), Share(1, 2))
    assert report.load_before == {"eu": 4, "us": 1}
    assert report.load_after == {"eu": 3, "us": 2}
    assert report.changed_services == ("app.",)
    assert report_lines(report) == [
        "queries whose answer changes: 1 of 5 (20.0%)",
        "client networks (/24, /56) with a changed answer: 1 of 3 (33.3%)",
        "services whose answer changes: 1 of 2 (50.0%)",
        "  app.",
        "load per site (endpoints answered):",
        "  site          before           after",
        "  eu         4 (80.0%)       3 (60.0%)",
        "  us         1 (20.0%)       2 (40.0%)",
    ]
    assert report_json(report) == {
        "queries": {"changed": 1, "total": 5, "share": 0.2},
        "client_networks": {"changed": 1, "total": 3, "share": 0.333333},
        "services": {"changed": 1, "total": 2, "share": 0.5, "changed_names": ["app."]},
        "load": {"eu": {"before": 4, "after": 3}, "us": {"before": 1, "after": 2}},
    }


def test_nothing_replayed_is_all_zero_and_says_no_endpoint_answered() -> None:
    report = compare([])
    assert report.queries == Share(0, 0) and report.queries.fraction == 0.0
    assert report_lines(report)[-1] == "load per site: no endpoint answered before or after"
