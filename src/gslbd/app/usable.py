"""Whether a validated config can be used here: the checks beyond validation that `gslbd check`,
`gslbd serve` and every reload make, without building anything the running server needs.

    zone_problems(old, new)          no zone, or a reload that would drop every zone being served
    resolved_env(config, rng)        the GeoIP database opened and looked up once: the policy
                                     environment, or ConfigError with located problems
    unusable(config)                 both, as problems (what `gslbd check` prints)

`resolve` (app/generation.py) resolves a config through `resolved_env`, so the rule of what makes a
config unusable is written once. This module imports none of the server (no asyncio, aiohttp or
redis): `gslbd check` loads it alone, which keeps the command's start-up cheap. The Redis URL is
checked where it is read (gslbd.config.urls, the one parser, gives a located error).
"""

from __future__ import annotations

import ipaddress
import random

from gslbd.errors import ConfigError, Problem
from gslbd.model.config import Config
from gslbd.policy import PolicyEnv
from gslbd.policy.locate import build_env

# An address every locator can be asked: a database that opens but cannot answer fails here, not on
# the first query.
_PROBE = int(ipaddress.IPv4Address("192.0.2.1"))


def zone_problems(old: Config | None, new: Config) -> list[Problem]:
    """A config that serves no zone, or (reloaded over `old`) none of the zones being served, would
    turn every answer into REFUSED: an error for `serve`, `check` and a reload (`--allow-no-zones`
    on the command line lets a config without zones through)."""
    if not new.zones:
        why = "no zone is configured, so every query would be answered REFUSED"
        return [Problem(new.source, None, "zones", why)]
    if old is not None and old.zones and not {z.origin for z in old.zones} & {z.origin for z in new.zones}:
        served = ", ".join(z.origin for z in old.zones)
        why = f"the new configuration drops every zone being served ({served})"
        return [Problem(new.source, None, "zones", why)]
    return []


def close_env(env: PolicyEnv) -> None:
    """Close what `resolved_env` opened (the GeoIP database)."""
    close = getattr(env.locator, "close", None)
    if callable(close):
        close()


def resolved_env(config: Config, rng: random.Random) -> PolicyEnv:
    """`config`'s policy environment: its GeoIP database opened (and one address looked up). ConfigError
    with every located problem when something cannot be used (nothing is left open then)."""
    problems: list[Problem] = []
    env: PolicyEnv | None = None
    try:
        env = build_env(config, rng)
        env.locator.locate(_PROBE, False)
    except ConfigError as exc:  # located in the config file (at the database's line); the message names it
        geoip = "topology.geoip.database", config.topology.geoip_line
        problems.extend(
            Problem(config.source, p.line or (geoip[1] if p.path == geoip[0] else None), p.path, p.message)
            for p in exc.problems
        )
    except Exception as exc:  # a damaged database can fail in many ways
        where, line = "topology.geoip.database", config.topology.geoip_line
        problems.append(Problem(config.source, line, where, f"cannot use GeoIP database: {exc}"))
    if problems or env is None:
        if env is not None:
            close_env(env)
        raise ConfigError(problems)
    return env


def unusable(config: Config, *, allow_no_zones: bool = False) -> list[Problem]:
    """What `gslbd check` and `gslbd serve` find beyond validation: no zones (unless allowed), and
    everything `resolve` opens (the GeoIP database) failing."""
    problems = [] if allow_no_zones else zone_problems(None, config)
    try:
        env = resolved_env(config, random.Random(0))
    except ConfigError as exc:
        return problems + exc.problems
    close_env(env)
    return problems
