"""Frozen values that describe what gslbd serves: zones, services, endpoints, checks, topology.

Every DNS name in the model is absolute, lower case and ends with a dot ("app.gslb.example.com.").
"""

from gslbd.model.check import Check
from gslbd.model.config import (
    ApiConfig,
    ClusterConfig,
    Config,
    DnsConfig,
    ListenAddress,
    PeersConfig,
    PeerSite,
    RedisConfig,
    SiteConfig,
    StateConfig,
)
from gslbd.model.service import Endpoint, EndpointKey, Service
from gslbd.model.topology import Locality, NetworkEntry, SiteInfo, Topology
from gslbd.model.zone import Nameserver, Soa, StaticRecord, Zone

__all__ = [
    "ApiConfig",
    "Check",
    "ClusterConfig",
    "Config",
    "DnsConfig",
    "Endpoint",
    "EndpointKey",
    "ListenAddress",
    "Locality",
    "Nameserver",
    "NetworkEntry",
    "PeerSite",
    "PeersConfig",
    "RedisConfig",
    "Service",
    "SiteConfig",
    "SiteInfo",
    "Soa",
    "StateConfig",
    "StaticRecord",
    "Topology",
    "Zone",
]
