"""The quorum's decision (state/quorum.py) and the health book answering by it: pure, instant."""

from __future__ import annotations

import pytest

from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.book import HealthBook
from gslbd.state.quorum import decide, heard_majority, verdict
from gslbd.state.snapshot import effective_up
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState, EndpointKind

UP, DOWN = True, False

# (owner's vote, the other sites' votes, K) -> up for answering (None: nobody voted)
CASES: list[tuple[str, bool | None, list[bool], int, bool | None]] = [
    ("nobody voted: no verdict (the owner's stands)", None, [], 2, None),
    ("the owner alone sees it down, K 2, the others up: stays", DOWN, [UP, UP], 2, UP),
    ("one remote alone sees it down, K 2: stays", UP, [DOWN, UP], 2, UP),
    ("the owner and one remote see it down, K 2: out", DOWN, [DOWN, UP], 2, DOWN),
    ("two remotes see it down though the owner sees it up, K 2: out", UP, [DOWN, DOWN], 2, DOWN),
    ("every site sees it down, K 3: out", DOWN, [DOWN, DOWN], 3, DOWN),
    ("two of three down, K 3: stays", DOWN, [DOWN, UP], 3, UP),
    ("K 1: any one site's down vote takes it out", UP, [UP, DOWN], 1, DOWN),
    ("only the owner voted (old peers cast none): its verdict stands", DOWN, [], 2, DOWN),
    ("only the owner voted, up", UP, [], 2, UP),
    ("the owner cast no vote: one remote down is not K", None, [DOWN], 2, UP),
    ("the owner cast no vote: K remotes down take it out", None, [DOWN, DOWN], 2, DOWN),
    (
        "two sites voting (owner down, one remote up), K 3: fewer voters than K, owner and remote split",
        DOWN,
        [UP],
        3,
        UP,
    ),
    ("two sites voting, both down, K 3: every voter sees it down", DOWN, [DOWN], 3, DOWN),
]


@pytest.mark.parametrize(
    ("owner", "others", "k", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_an_endpoint_is_down_when_k_sites_see_it_down(
    owner: bool | None, others: list[bool], k: int, expected: bool | None
) -> None:
    assert decide(owner, others, k) is expected


def test_every_site_computes_the_same_verdict_from_the_same_votes() -> None:
    key: EndpointKey = ("app.gslb.test.", "192.0.2.10")
    cast = {"eu": {key: DOWN}, "us": {key: DOWN}, "ap": {key: UP}}
    for k in (1, 2, 3):
        found = set()
        for here, own in cast.items():
            peers = {site: votes for site, votes in cast.items() if site != here}
            found.add(verdict(key, "eu", here, own, peers, k))
        assert len(found) == 1, (k, found)


@pytest.mark.parametrize(
    ("sites", "heard", "majority"),
    [(3, 2, True), (3, 1, True), (3, 0, False), (2, 1, True), (2, 0, False), (5, 2, True), (5, 1, False)],
)
def test_a_site_hears_a_majority_when_it_and_the_peers_it_hears_are_more_than_half(
    sites: int, heard: int, majority: bool
) -> None:
    assert heard_majority(sites, heard) is majority


SERVICE = "app.gslb.test."
OWN: EndpointKey = (SERVICE, "192.0.2.10")  # eu's, this site is eu
REMOTE: EndpointKey = (SERVICE, "198.51.100.10")  # us's


def _book(k: int = 2) -> HealthBook:
    book = HealthBook()
    book.configure_quorum(k, "eu", {OWN: "eu", REMOTE: "us"})
    return book


def _record(book: HealthBook, key: EndpointKey, healthy: bool) -> None:
    book.record(key, EndpointStatus(healthy=healthy))


def test_this_sites_down_verdict_alone_leaves_its_endpoint_answered_but_published_as_its_vote() -> None:
    book = _book()
    book.set_peer_votes({"us": {OWN: UP}, "ap": {OWN: UP}})
    _record(book, OWN, DOWN)
    snapshot = book.snapshot()
    assert snapshot.health[OWN] is UP
    assert snapshot.votes[OWN] is DOWN


def test_a_remote_endpoint_this_site_cannot_reach_stays_while_the_others_see_it_up() -> None:
    book = _book()
    _record(book, REMOTE, DOWN)
    book.set_peer_votes({"us": {REMOTE: UP}, "ap": {REMOTE: UP}})
    assert book.snapshot().health[REMOTE] is UP
    book.set_peer_votes({"us": {REMOTE: UP}, "ap": {REMOTE: DOWN}})
    assert book.snapshot().health[REMOTE] is DOWN


def test_a_remote_endpoint_nobody_voted_on_counts_as_its_owner_publishes_it() -> None:
    book = _book()
    assert book.snapshot().health[REMOTE] is UP
    assert OWN not in book.snapshot().health  # no verdict yet: up, as without a quorum


def test_admin_down_wins_over_the_votes() -> None:
    book = _book()
    book.set_peer_votes({"us": {OWN: UP}})
    _record(book, OWN, UP)
    book.set_admin(OWN, AdminState.DOWN)
    endpoint = Endpoint(SERVICE, OWN[1], EndpointKind.IPV4, "eu")
    assert effective_up(endpoint, book.snapshot()) is False


def test_partitioned_remote_endpoints_keep_their_last_agreed_verdict() -> None:
    book = _book()
    book.set_peer_votes({"us": {REMOTE: UP}, "ap": {REMOTE: UP}})
    _record(book, REMOTE, UP)
    assert book.snapshot().health[REMOTE] is UP
    book.set_partitioned(True)
    _record(book, REMOTE, DOWN)  # this site's own (partial) view
    book.set_peer_votes({"ap": {REMOTE: DOWN}})  # ignored: the votes heard before stay
    assert book.snapshot().health[REMOTE] is UP
    book.set_partitioned(False)
    book.set_peer_votes({"us": {REMOTE: UP}, "ap": {REMOTE: DOWN}})
    assert book.snapshot().health[REMOTE] is UP  # this site's vote: still the agreed one (frozen)
    _record(book, REMOTE, DOWN)  # perhaps a probe under way across the heal
    assert book.snapshot().health[REMOTE] is UP
    _record(book, REMOTE, DOWN)  # a second result after the heal: this site's own vote again
    assert book.snapshot().votes[REMOTE] is DOWN
    assert book.snapshot().health[REMOTE] is DOWN


def test_a_partitioned_site_publishes_the_agreed_verdicts_of_remote_endpoints_as_its_votes() -> None:
    book = _book()
    book.set_peer_votes({"us": {REMOTE: UP, OWN: UP}, "ap": {REMOTE: UP, OWN: UP}})
    _record(book, REMOTE, UP)
    _record(book, OWN, UP)
    book.snapshot()
    book.set_partitioned(True)
    _record(book, REMOTE, DOWN)  # its probes fail with the partition
    _record(book, OWN, DOWN)  # its own endpoint: its own probes, published as they are
    snapshot = book.snapshot()
    assert snapshot.votes[REMOTE] is UP
    assert snapshot.votes[OWN] is DOWN
    assert book.status(REMOTE).healthy is False  # the raw verdict is kept (status, API)


def test_after_a_total_partition_heals_the_votes_cast_during_it_take_nothing_out() -> None:
    """Three sites, each partitioned (every link down): each voted the others' endpoints down during
    it. Healed, each hears the others' frozen (agreed, up) votes: nothing leaves the answers, and a
    result that agrees releases the frozen vote at once."""
    book = _book()
    book.set_peer_votes({"us": {REMOTE: UP}, "ap": {REMOTE: UP}})
    _record(book, REMOTE, UP)
    book.snapshot()
    book.set_partitioned(True)
    _record(book, REMOTE, DOWN)
    book.set_partitioned(False)
    book.set_peer_votes({"us": {REMOTE: UP}, "ap": {REMOTE: UP}})
    assert book.snapshot().health[REMOTE] is UP
    assert book.snapshot().votes[REMOTE] is UP
    _record(book, REMOTE, UP)  # probed up after the heal: agrees, released
    _record(book, REMOTE, DOWN)  # from now on its own results are its vote
    assert book.snapshot().votes[REMOTE] is DOWN


def test_a_remote_endpoint_that_died_during_the_partition_is_voted_down_two_results_after_the_heal() -> None:
    book = _book()
    book.set_peer_votes({"us": {REMOTE: UP}, "ap": {REMOTE: UP}})
    _record(book, REMOTE, UP)
    book.snapshot()
    book.set_partitioned(True)
    _record(book, REMOTE, DOWN)
    _record(book, REMOTE, DOWN)  # results during the partition do not count towards the release
    book.set_partitioned(False)
    book.set_peer_votes({"us": {REMOTE: DOWN}, "ap": {REMOTE: UP}})
    _record(book, REMOTE, DOWN)
    assert book.snapshot().health[REMOTE] is UP  # one vote down (the owner's): stays
    _record(book, REMOTE, DOWN)
    assert book.snapshot().health[REMOTE] is DOWN  # the owner's and this site's


def test_without_a_quorum_the_raw_verdicts_are_answered_and_no_votes_published() -> None:
    book = HealthBook()
    _record(book, OWN, DOWN)
    snapshot = book.snapshot()
    assert snapshot.health[OWN] is DOWN
    assert dict(snapshot.votes) == {}
