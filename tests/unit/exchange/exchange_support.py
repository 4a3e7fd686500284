"""Configurations for the exchange's unit tests: site eu with peers us and ap, zone gslb.test."""

from __future__ import annotations

import random

from gslbd.config import load_config_text
from gslbd.model.config import Config
from gslbd.policy.base import PolicyEnv
from gslbd.policy.locate import build_env

ZONE = "gslb.test."
APP = "app.gslb.test."

SERVICES = """\
  - name: app
    policy: failover
    failover_order: [eu, us, ap]
    endpoints:
      - {address: 192.0.2.1, site: eu}
      - {address: "2001:db8::1", site: eu}
      - {address: 198.51.100.1, site: us, weight: 5, priority: 1}
      - {address: 203.0.113.1, site: ap}
  - name: web
    endpoints:
      - {address: 192.0.2.2, site: eu}
      - {address: 192.0.2.3, site: eu, admin: down}
"""


def config(site: str = "eu", services: str = SERVICES, peers: str | None = None, extra: str = "") -> Config:
    """A config of `site`; `peers` is the YAML of the peers block (default: the two other sites)."""
    if peers is None:
        others = [s for s in ("eu", "us", "ap") if s != site]
        listed = "\n".join(f'    - {{name: {p}, nameservers: ["127.0.0.9:5300"]}}' for p in others)
        peers = f"  interval: 5s\n  stale_after: 30s\n  timeout: 1s\n  sites:\n{listed}\n"
    text = f"""\
site: {{name: {site}}}
dns: {{listen: ["127.0.0.1:5353"]}}
zones:
  - origin: {ZONE}
    nameservers:
      - {{name: gslb-ns-eu-gslb.test., address: 127.0.0.2}}
      - {{name: gslb-ns-us-gslb.test., address: 127.0.0.3}}
      - {{name: gslb-ns-ap-gslb.test., address: 127.0.0.4}}
sites:
  eu: {{locality: {{region: europe}}}}
  us: {{locality: {{region: america}}}}
  ap: {{locality: {{region: asia}}}}
services:
{services}
"""
    if peers:
        text += "peers:\n" + peers
    return load_config_text(text + extra)


def env(cfg: Config) -> PolicyEnv:
    return build_env(cfg, random.Random(7))
