"""Replaying queries through two generations in process (app/whatif.py): the server's own Responder,
the same random draws per query for both, admin changes by selector."""

from __future__ import annotations

import ipaddress

import dns.message
import pytest

from gslbd.app.whatif import Replayer, SelectorMatchesNothing, admin_overrides, replay
from gslbd.app.whatif_report import compare
from gslbd.config import load_config_text
from gslbd.model.config import Config
from gslbd.model.selector import parse_admin
from gslbd.server.dnstap.capture import TapQuery
from gslbd.types import AdminState

ZONE = "gslb.example.com."


def config(pick_endpoints: str) -> Config:
    return load_config_text(f"""
version: 1
site: {{name: eu}}
zones: [{{origin: {ZONE}, nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]}}]
sites: {{eu: {{}}, us: {{}}}}
services:
  - name: w.{ZONE}
    policy: weighted
    max_answers: 1
    check: none
    endpoints: [{{address: 192.0.2.1, site: eu}}, {{address: 198.51.100.1, site: us}}]
  - name: pick.{ZONE}
    policy: random
    max_answers: 1
    check: none
    endpoints: [{pick_endpoints}]
""")


BOTH = "{address: 192.0.2.2, site: eu}, {address: 198.51.100.2, site: us}, {address: 203.0.113.2, site: us}"


def query(name: str, client: str) -> TapQuery:
    wire = dns.message.make_query(f"{name}.{ZONE}", "A").to_wire()
    return TapQuery(wire, int(ipaddress.ip_address(client)), v6=False, tcp=False)


QUERIES = [query(name, f"10.0.{i % 3}.9") for i in range(60) for name in ("w", "pick")]


def test_the_same_config_answers_every_query_the_same_despite_random_policies() -> None:
    report = compare(
        replay(QUERIES, Replayer.for_config(config(BOTH), {}, 7), Replayer.for_config(config(BOTH), {}, 7))
    )
    assert report.queries.changed == 0 and report.queries.total == 120
    assert report.load_before == report.load_after
    assert set(report.load_before) == {"eu", "us"}  # both sites are drawn


def test_a_change_to_one_random_service_leaves_the_other_ones_draws_alone() -> None:
    before = Replayer.for_config(config(BOTH), {}, 7)
    after = Replayer.for_config(config("{address: 192.0.2.2, site: eu}"), {}, 7)
    report = compare(replay(QUERIES, before, after))
    assert report.changed_services == (f"pick.{ZONE}",)
    assert report.load_after["eu"] == report.load_before["eu"] + report.queries.changed


def test_admin_down_by_selector_moves_the_answers() -> None:
    candidate = config(BOTH)
    admin = admin_overrides(candidate, [parse_admin("site=eu service=w.* down")])
    assert admin == {(f"w.{ZONE}", "192.0.2.1"): AdminState.DOWN}
    replayed = replay(
        QUERIES, Replayer.for_config(candidate, {}, 7), Replayer.for_config(candidate, admin, 7)
    )
    report = compare(replayed)
    assert report.changed_services == (f"w.{ZONE}",)
    w = [r for r in replayed if r.service == f"w.{ZONE}"]
    assert {r.after.sites for r in w} == {("us",)}  # every answer of w is us's now
    assert report.queries.changed == sum(r.before.sites == ("eu",) for r in w) > 0


def test_later_changes_win_and_a_selector_matching_nothing_is_refused() -> None:
    candidate = config(BOTH)
    changes = [parse_admin("site=us down"), parse_admin("address=203.0.113.2 up")]
    assert admin_overrides(candidate, changes)[(f"pick.{ZONE}", "203.0.113.2")] is AdminState.UP
    with pytest.raises(SelectorMatchesNothing) as caught:
        admin_overrides(candidate, [parse_admin("region=mars down")])
    assert str(caught.value) == "--admin 'region=mars down' selects no endpoint of the candidate config"
