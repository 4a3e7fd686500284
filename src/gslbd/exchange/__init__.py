"""Multi-site exchange over DNS: poll peer sites' localtargets and heartbeats, push NOTIFY on change.

- `Exchange` (site.py): what the composition root runs (poller + notifier + heartbeat timer);
- `PeerBook` (peerbook.py): every peer's state and the endpoints learned from them;
- `PeerState`, `PeerAnswer`, `Freshness` (peerstate.py): the pure per-peer state machine.
What a site publishes is decided in answer/exchange_names.py; docs/multisite.md explains it all.
"""

from gslbd.exchange.peerbook import PeerBook, learned_endpoints
from gslbd.exchange.peerstate import Freshness, PeerAnswer, PeerState
from gslbd.exchange.site import Exchange, heartbeat_period

__all__ = [
    "Exchange",
    "Freshness",
    "PeerAnswer",
    "PeerBook",
    "PeerState",
    "heartbeat_period",
    "learned_endpoints",
]
