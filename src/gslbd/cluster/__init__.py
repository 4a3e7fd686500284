"""Cluster mode: the instances of one site share raw health results and admin states through Redis.

keys (names, TTLs, messages), url (URL schemes, the redis-py client), cycles (aligned cycles, what to
feed), link (the connection kept alive), store and admin (admin states), node (all of it for one
instance; the health scheduler's probe gate). docs/cluster.md tells the whole story.
"""

from gslbd.cluster.node import ClusterNode
from gslbd.cluster.store import RedisStateStore

__all__ = ["ClusterNode", "RedisStateStore"]
