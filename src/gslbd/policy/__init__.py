"""Policies: one module each, a registry from name to policy. All pure."""

from __future__ import annotations

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import Client, FixedPlan, Location, Locator, NoLocator, Plan, Policy, PolicyEnv
from gslbd.policy.failover import Failover
from gslbd.policy.geo import Geo
from gslbd.policy.pools import PoolPlanner
from gslbd.policy.random_order import RandomOrder
from gslbd.policy.rendezvous import Rendezvous
from gslbd.policy.round_robin import RoundRobin
from gslbd.policy.weighted import Weighted
from gslbd.types import PolicyName

REGISTRY: dict[PolicyName, Policy] = {
    PolicyName.ROUND_ROBIN: RoundRobin(),
    PolicyName.RANDOM: RandomOrder(),
    PolicyName.WEIGHTED: Weighted(),
    PolicyName.FAILOVER: Failover(),
    PolicyName.GEO: Geo(),
    PolicyName.HASH: Rendezvous(),
}


def get_policy(name: PolicyName) -> Policy:
    """The policy registered under `name`."""
    return REGISTRY[name]


def plan_service(candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan:
    """The plan of a service over its candidates: its policy, inside the pool its rules reach when it has
    pools (policy/pools.py)."""
    policy = REGISTRY[service.policy]
    if service.rules:
        return PoolPlanner(policy).plan(candidates, service, env)
    return policy.plan(candidates, service, env)


__all__ = [
    "REGISTRY",
    "Client",
    "FixedPlan",
    "Location",
    "Locator",
    "NoLocator",
    "Plan",
    "Policy",
    "PolicyEnv",
    "get_policy",
    "plan_service",
]
