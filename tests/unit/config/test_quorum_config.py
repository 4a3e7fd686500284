"""`peers.quorum: {votes: K}`: the vote count is checked against the sites that can vote, with the
file:line and dotted path of the value."""

from __future__ import annotations

import pytest

from gslbd.config import check_config_text

ZONE = """\
site: {name: eu}
zones:
  - origin: gslb.example.com.
    nameservers:
      - {name: gslb-ns-eu-gslb.example.com., address: 127.0.0.2}
      - {name: gslb-ns-us-gslb.example.com., address: 127.0.0.3}
"""
PEERS = "peers:\n  sites: [{name: us, nameservers: ['127.0.0.3']}]\n"


def problems_of(text: str) -> tuple[object, list[str]]:
    config, problems = check_config_text(text, "c.yaml")
    return config, [str(p) for p in problems if p.severity == "error"]


@pytest.mark.parametrize(
    ("quorum", "expected"),
    [
        (
            "  quorum: {votes: 3}\n",
            "c.yaml:9: peers.quorum.votes: votes (3) is more than the sites that can vote (2: this site and"
            " its peers); no endpoint could ever be taken out",
        ),
        ("  quorum: {votes: 0}\n", "c.yaml:9: peers.quorum.votes: must be between 1 and 1000, got 0"),
        ("  quorum: {}\n", "c.yaml:9: peers.quorum.votes: required key is missing"),
        (
            "  quorum: {votes: 1, vote: 2}\n",
            "c.yaml:9: peers.quorum.vote: unknown key 'vote'; did you mean 'votes'?",
        ),
    ],
)
def test_a_quorum_the_sites_cannot_reach_is_a_located_error(quorum: str, expected: str) -> None:
    config, errors = problems_of(ZONE + PEERS + quorum)
    assert config is None
    assert errors == [expected]


def test_with_discovered_peers_the_quorum_is_checked_against_the_sites_found() -> None:
    text = ZONE + "peers:\n  discover: ns\n  quorum:\n    votes: 3\n"
    _config, errors = problems_of(text)
    assert errors == [
        "c.yaml:10: peers.quorum.votes: votes (3) is more than the sites that can vote (2: this site and"
        " its peers); no endpoint could ever be taken out"
    ]


def test_a_quorum_as_large_as_every_site_is_accepted_and_kept() -> None:
    config, errors = problems_of(ZONE + PEERS + "  quorum: {votes: 2}\n")
    assert errors == []
    assert config is not None and config.peers is not None  # type: ignore[attr-defined]
    assert config.peers.quorum == 2  # type: ignore[attr-defined]


def test_without_a_quorum_there_is_none() -> None:
    config, errors = problems_of(ZONE + PEERS)
    assert errors == []
    assert config.peers.quorum is None  # type: ignore[attr-defined]


def test_a_quorum_without_the_exchange_zone_is_warned_about() -> None:
    config, problems = check_config_text(ZONE + PEERS + "  transfer: false\n  quorum: {votes: 2}\n", "c.yaml")
    assert config is not None
    assert [str(p) for p in problems if p.severity == "warning"] == [
        "c.yaml:10: peers.quorum: votes travel in the exchange zone:"
        " with transfer: false no site publishes any"
    ]
