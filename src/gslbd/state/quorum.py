"""Cross-site health votes with a quorum (`peers.quorum: {votes: K}`). Pure: no I/O, no clock.

With a quorum every site probes every endpoint that has a check, its own and the other sites', and
publishes its raw verdict per endpoint (exchange/zone.py: TXT records under `votes.` of its exchange
zone). Each site then decides, from the same votes, whether an endpoint is down for answering:

    need  = K                      when the endpoint's owner cast no vote (an old peer, not heard yet)
          = min(K, sites voting)   when the owner voted (so the owner alone decides when nobody else
                                   can vote: its endpoint keeps the owner's verdict)
    down  = at least `need` of the sites that voted (the owner included) see it down

So one site's view alone (the owner's or a remote's) never takes an endpoint out when K > 1 and
another site voted up; an endpoint nobody votes on keeps the owner's verdict (`None`: no verdict from
the votes). Admin state is applied after this (snapshot.effective_up: admin down always wins). Every
site computes the same result from the same votes, whichever site it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gslbd.model.service import EndpointKey

# site -> endpoint -> its raw verdict (True: up), as that site publishes it
Votes = Mapping[str, Mapping[EndpointKey, bool]]


def decide(owner: bool | None, others: Iterable[bool], votes: int) -> bool | None:
    """Is the endpoint up for answering? `owner`: the owner site's own vote (None: it cast none),
    `others`: the votes of the other sites heard (this site's included when it is not the owner),
    `votes`: K. None when nobody voted."""
    cast = list(others)
    if owner is not None:
        cast.append(owner)
    if not cast:
        return None
    need = min(votes, len(cast)) if owner is not None else votes
    down = sum(1 for v in cast if not v)
    return down < need


def verdict(
    key: EndpointKey,
    owner: str,
    own_site: str,
    own_votes: Mapping[EndpointKey, bool],
    peer_votes: Votes,
    votes: int,
) -> bool | None:
    """The quorum's verdict on one endpoint at site `own_site`: `own_votes` are this site's raw
    verdicts, `peer_votes` those of the fresh peers. For an endpoint of another site, None (nobody
    voted) means "as its owner publishes it"."""
    owner_vote = own_votes.get(key) if owner == own_site else peer_votes.get(owner, {}).get(key)
    others: list[bool] = []
    if owner != own_site and key in own_votes:
        others.append(own_votes[key])
    for site, cast in peer_votes.items():
        if site != owner and key in cast:
            others.append(cast[key])
    return decide(owner_vote, others, votes)


def tally(key: EndpointKey, own_votes: Mapping[EndpointKey, bool], peer_votes: Votes) -> tuple[int, int]:
    """(sites seeing the endpoint down, sites seeing it up) among this site and the fresh peers."""
    cast = [own_votes[key]] if key in own_votes else []
    cast += [v[key] for v in peer_votes.values() if key in v]
    down = sum(1 for v in cast if not v)
    return down, len(cast) - down


def heard_majority(sites: int, heard_peers: int) -> bool:
    """Does a site that hears `heard_peers` of its peers (fresh, answering) hear a majority of the
    `sites` (itself included)? A site that does not is partitioned: it fails static."""
    return heard_peers + 1 > sites // 2
