"""Every peer's state, and the endpoints they add to this site's services.

The book is driven by the poller (`answer`, `failure`, `evaluate`) and reads time from the injected
clock, so its behaviour is tested with a FakeClock. Each call returns whether the learned endpoints
changed; only then does the composition root rebuild the answers. State changes are logged once each
(a peer stops answering, goes stale, is fresh again), never per poll.

A published address becomes an endpoint of the service with site = the peer. When the configuration
lists that address under the same service with that peer's site, the configured endpoint is used (its
weight, priority and locality); otherwise a plain one is made (weight 1, priority 0, the peer site's
locality from `sites`). An address that this site owns or probes itself is not taken from a peer.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from gslbd.answer.exchange_names import peer_site_names, read_load, read_vote
from gslbd.clock import Clock
from gslbd.exchange.peerstate import Freshness, PeerAnswer, PeerState, evaluate, on_answer, on_failure
from gslbd.metrics import (
    EXCHANGE_PARTITIONED,
    PEER_ENDPOINTS,
    PEER_HEARD,
    PEER_LAST_ANSWER_AGE,
    PEER_LOAD_GARBAGE,
    PEER_POLLS,
    PEER_QUERY_ERRORS,
    PEER_STALE,
)
from gslbd.model.config import Config
from gslbd.model.load import LoadState
from gslbd.model.service import Endpoint, EndpointKey, Service
from gslbd.state.quorum import heard_majority
from gslbd.types import CheckType, EndpointKind

log = logging.getLogger(__name__)

Learned = Mapping[str, tuple[Endpoint, ...]]
_EMPTY: Learned = MappingProxyType({})


def _address_order(address: str) -> tuple[int, int]:
    ip = ipaddress.ip_address(address)
    return ip.version, int(ip)


def learned_endpoints(
    config: Config, states: Mapping[str, PeerState], static: bool = False
) -> dict[str, tuple[Endpoint, ...]]:
    """Service fqdn -> endpoints learned from the peers that count now (fresh ones), in peer order.
    `static` (partitioned, peers.quorum): every peer's last view counts, stale or not (fail static)."""
    return learned_for(config, config.services, states, static)


def learned_for(
    config: Config, services: Iterable[Service], states: Mapping[str, PeerState], static: bool = False
) -> dict[str, tuple[Endpoint, ...]]:
    """`learned_endpoints` of some of the config's services only."""
    out: dict[str, tuple[Endpoint, ...]] = {}
    if not states:  # no peers: nothing is learned
        return out
    peers = peer_site_names(config)
    voting = config.peers is not None and config.peers.quorum is not None
    for service in services:
        own = {e.address for e in service.endpoints if e.site not in peers}
        seen: set[str] = set()
        found: list[Endpoint] = []
        for name, state in states.items():
            if static:
                published = state.targets.get(service.name)
            elif voting and state.freshness is not Freshness.FRESH:
                published = _voted(service, name, state.targets.get(service.name, ()))
            else:
                published = state.usable.get(service.name)
            if not published:
                continue
            fresh = [a for a in published if a not in own and a not in seen]
            configured = [e for e in service.endpoints if e.site == name and e.address in fresh]
            listed = {e.address for e in configured}
            found += configured
            info = config.site_info(name)
            locality = info.locality if info is not None else None
            for address in sorted((a for a in fresh if a not in listed), key=_address_order):
                kind = EndpointKind.IPV6 if ":" in address else EndpointKind.IPV4
                if locality is None:
                    found.append(Endpoint(service.name, address, kind, name))
                else:
                    found.append(Endpoint(service.name, address, kind, name, locality))
            seen.update(fresh)
        if found:
            out[service.name] = tuple(found)
    return out


def _voted(service: Service, site: str, last: tuple[str, ...]) -> tuple[str, ...]:
    """With peers.quorum, of a stale peer's last view: the addresses that every site votes on (listed
    under that site with a check that is not a push). Their votes decide, not the peer's silence."""
    checked = {
        e.address
        for e in service.endpoints
        if e.site == site and e.check is not None and e.check.type is not CheckType.PUSH
    }
    return tuple(a for a in last if a in checked)


class PeerBook:
    """The state of every configured peer site, and the endpoints learned from them."""

    def __init__(self, config: Config, clock: Clock) -> None:
        self._clock = clock
        self._config = config
        self._states: dict[str, PeerState] = {}
        self._learned: Learned = _EMPTY
        self._services: dict[str, Service] = {}
        self._partitioned = False
        self._figures: dict[str, dict[EndpointKey, LoadState]] = {}  # peer -> its last load figures
        self.configure(config)

    @property
    def stale_after(self) -> float:
        peers = self._config.peers
        return peers.stale_after if peers is not None else 0.0

    def configure(self, config: Config) -> bool:
        """Follow a new configuration: peers that remain keep their state, others come and go.
        True when the learned endpoints changed."""
        self._config = config
        names = [p.name for p in config.peers.sites] if config.peers is not None else []
        # Only a site with peers looks services up by name (no peers: nothing is learned).
        self._services = {service.name: service for service in config.services} if names else {}
        old = self._states
        self._states = {n: old.get(n, PeerState(n)) for n in names}
        for gone in set(old) - set(names):
            _drop_metrics(gone)
            self._figures.pop(gone, None)
        for name in names:
            if name not in old:
                PEER_STALE.labels(peer=name).set(1)
                PEER_HEARD.labels(peer=name).set(0)
                PEER_ENDPOINTS.labels(peer=name).set(0)
        self._judge_partition()
        return self._merge()

    # -- votes and partition safety (peers.quorum) -------------------------------------------------

    @property
    def quorum(self) -> int | None:
        peers = self._config.peers
        return peers.quorum if peers is not None else None

    @property
    def partitioned(self) -> bool:
        """With peers.quorum: this site hears fewer than a majority of the sites (itself included)."""
        return self._partitioned

    def heard(self) -> int:
        """Peers heard now (fresh, their latest poll answered)."""
        return sum(1 for s in self._states.values() if s.heard)

    def _judge_partition(self) -> bool:
        """Recompute the partition state; True when it changed."""
        # not before every peer was polled once: a starting site is not partitioned, only new
        polled = all(s.polls for s in self._states.values())
        sites = len(self._states) + 1
        partitioned = self.quorum is not None and polled and not heard_majority(sites, self.heard())
        EXCHANGE_PARTITIONED.set(1 if partitioned else 0)
        if partitioned is self._partitioned:
            return False
        self._partitioned = partitioned
        heard = self.heard()
        if partitioned:
            log.warning(
                "partitioned: this site hears %d of %d sites (itself included), fewer than a majority;"
                " remote endpoints keep their last agreed verdicts",
                heard + 1,
                sites,
                extra={"event": "partition", "state": "partitioned", "heard": heard + 1, "sites": sites},
            )
        else:
            log.info(
                "no longer partitioned: this site hears %d of %d sites",
                heard + 1,
                sites,
                extra={"event": "partition", "state": "joined", "heard": heard + 1, "sites": sites},
            )
        return True

    def votes(self) -> dict[str, dict[EndpointKey, bool]]:
        """The votes of every fresh peer: site -> (service, address) -> up (peers.quorum)."""
        out: dict[str, dict[EndpointKey, bool]] = {}
        for name, state in self._states.items():
            if state.freshness is not Freshness.FRESH or not state.votes:
                continue
            cast: dict[EndpointKey, bool] = {}
            for service, texts in state.votes.items():
                for text in texts:
                    vote = read_vote(text)
                    if vote is not None:
                        cast[(service, vote[0])] = vote[1]
            out[name] = cast
        return out

    # -- load figures (load feedback) ---------------------------------------------------------------

    def loads(self) -> dict[EndpointKey, LoadState]:
        """The load figure of every learned endpoint whose site publishes one: (service, address) ->
        the state its answers use. A peer's last figures count exactly as long as its endpoints do (a
        stale peer's endpoints leave, and their figures with them; fail static keeps both)."""
        out: dict[EndpointKey, LoadState] = {}
        if not self._figures:
            return out
        for endpoints in self._learned.values():
            for e in endpoints:
                figures = self._figures.get(e.site)
                state = figures.get(e.endpoint_key) if figures is not None else None
                if state is not None:
                    out[e.endpoint_key] = state
        return out

    def _read_loads(self, before: PeerState, after: PeerState) -> bool:
        """A peer's published load figures changed: read them again. Garbled strings are counted
        (`gslbd_exchange_peer_load_garbage_total`) and ignored, with one log line per new view that
        holds any. True when the figures this site uses changed."""
        if before.loads == after.loads:
            return False
        figures: dict[EndpointKey, LoadState] = {}
        garbled: list[str] = []
        for service, texts in after.loads.items():
            for text in texts:
                figure = read_load(text)
                if figure is None:
                    garbled.append(text)
                else:
                    figures[(service, figure[0])] = figure[1]
        if garbled:
            PEER_LOAD_GARBAGE.labels(peer=after.name).inc(len(garbled))
            log.warning(
                "peer %s publishes %d load figures this site cannot read (ignored), e.g. %r",
                after.name,
                len(garbled),
                garbled[0][:80],
                extra={"event": "peer_load", "peer": after.name, "garbled": len(garbled)},
            )
        old = self._figures.get(after.name, {})
        if figures:
            self._figures[after.name] = figures
        else:
            self._figures.pop(after.name, None)
        return figures != old

    def close(self) -> None:
        """Drop this book's per-peer gauges (the instance stops)."""
        for name in self._states:
            _drop_metrics(name)

    @property
    def config(self) -> Config:
        return self._config

    def states(self) -> list[PeerState]:
        """Every peer's state, in configuration order."""
        return list(self._states.values())

    def state(self, name: str) -> PeerState | None:
        return self._states.get(name)

    def endpoints(self) -> Learned:
        """Service fqdn -> endpoints learned from fresh peers (what `Snapshot.peer_endpoints` holds)."""
        return self._learned

    def answer(self, peer: str, answer: PeerAnswer, errors: int = 0) -> bool:
        """A complete poll of `peer` (`errors` queries failed on the way and were answered on a retry).
        True when the learned endpoints changed."""
        before = self._states.get(peer)
        if before is None:
            return False
        now, wall = self._clock.monotonic(), self._clock.wall()
        after = on_answer(before, answer, now, wall, self.stale_after, errors)
        PEER_POLLS.labels(peer=peer, result="ok").inc()
        if errors:
            PEER_QUERY_ERRORS.labels(peer=peer).inc(errors)
        if before.last_answer is None:
            PEER_LAST_ANSWER_AGE.labels(peer=peer).set_function(lambda: self._age(peer))
        loads = self._read_loads(before, after)
        return self._replace(before, after) | self._others_changed(before, after) | loads

    def _others_changed(self, before: PeerState, after: PeerState) -> bool:
        """With peers.quorum: did the peer's votes or the partition state change (then the learned
        endpoints are merged again: fail static counts every peer's last view)?"""
        if self.quorum is None:
            return False
        votes = before.votes != after.votes or before.freshness is not after.freshness
        if self._judge_partition():
            self._merge()
            return True
        return votes

    def failure(self, peer: str, error: str, errors: int = 1) -> bool:
        """A poll of `peer` that did not complete after `errors` failed queries. True when the learned
        endpoints changed (the peer went stale)."""
        before = self._states.get(peer)
        if before is None:
            return False
        now, wall = self._clock.monotonic(), self._clock.wall()
        after = on_failure(before, error, errors, now, wall, self.stale_after)
        PEER_POLLS.labels(peer=peer, result="failed").inc()
        if errors:
            PEER_QUERY_ERRORS.labels(peer=peer).inc(errors)
        return self._replace(before, after) | self._others_changed(before, after)

    def evaluate(self) -> bool:
        """Judge every peer's freshness at the current time. True when the learned endpoints changed."""
        now, wall = self._clock.monotonic(), self._clock.wall()
        changed = others = False
        for before in list(self._states.values()):
            after = evaluate(before, now, wall, self.stale_after)
            changed = self._replace(before, after, merge=False) or changed
            others = (self.quorum is not None and before.freshness is not after.freshness) or others
        if self.quorum is not None and self._judge_partition():
            self._merge()
            return True
        return (self._merge() if changed else False) or others

    def _age(self, peer: str) -> float:
        state = self._states.get(peer)
        age = state.answer_age(self._clock.monotonic()) if state is not None else None
        return float("nan") if age is None else age

    def _replace(self, before: PeerState, after: PeerState, *, merge: bool = True) -> bool:
        self._states[after.name] = after
        _log_change(before, after, self.stale_after)
        PEER_STALE.labels(peer=after.name).set(0 if after.freshness is Freshness.FRESH else 1)
        PEER_HEARD.labels(peer=after.name).set(1 if after.heard else 0)
        PEER_ENDPOINTS.labels(peer=after.name).set(after.endpoint_count)
        if before.usable == after.usable:
            return False
        if not merge:
            return True
        changed = {
            k
            for k in before.usable.keys() | after.usable.keys()
            if before.usable.get(k) != after.usable.get(k)
        }
        return self._merge(changed)

    def _merge(self, changed: set[str] | None = None) -> bool:
        """Recompute the learned endpoints: of every service, or of the services in `changed` only (a
        poll that changed ten services of 100,000 costs ten, not 100,000)."""
        static = self._partitioned
        if changed is None or static or len(changed) * 4 > len(self._services):
            learned = learned_endpoints(self._config, self._states, static)
            if learned == self._learned:
                return False
            self._learned = MappingProxyType(learned)
            return True
        services = [self._services[name] for name in changed if name in self._services]
        found = learned_for(self._config, services, self._states)
        updates = {
            s.name: found.get(s.name) for s in services if found.get(s.name) != self._learned.get(s.name)
        }
        if not updates:
            return False
        learned = dict(self._learned)
        for name, endpoints in updates.items():
            if endpoints is None:
                del learned[name]
            else:
                learned[name] = endpoints
        self._learned = MappingProxyType(learned)
        return True


def _drop_metrics(peer: str) -> None:
    for gauge in (PEER_ENDPOINTS, PEER_STALE, PEER_HEARD, PEER_LAST_ANSWER_AGE, PEER_LOAD_GARBAGE):
        with contextlib.suppress(KeyError):
            gauge.remove(peer)


def _log_change(before: PeerState, after: PeerState, stale_after: float) -> None:
    name = after.name
    if after.failing and not before.failing:
        log.warning(
            "peer %s does not answer (%s); its last view counts until %gs after its last answer",
            name,
            after.last_error,
            stale_after,
            extra={"event": "peer", "peer": name, "state": "failing", "error": after.last_error},
        )
    elif before.failing and not after.failing:
        log.info("peer %s answers again", name, extra={"event": "peer", "peer": name, "state": "answering"})
    if before.freshness is after.freshness:
        return
    if after.freshness is Freshness.STALE:
        log.warning(
            "peer %s is stale: %s; its endpoints no longer count",
            name,
            after.detail,
            extra={"event": "peer", "peer": name, "state": "stale", "detail": after.detail},
        )
    else:
        log.info(
            "peer %s is fresh: %d endpoint addresses learned",
            name,
            after.endpoint_count,
            extra={"event": "peer", "peer": name, "state": "fresh", "endpoints": after.endpoint_count},
        )
