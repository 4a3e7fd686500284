"""`gslbd check` and `gslbd explain`. `check` imports none of the server: `explain` loads what it
needs (the App that resolves the config and builds its view) when it runs."""

from __future__ import annotations

import ipaddress
import sys

from gslbd.app.usable import unusable
from gslbd.cli.configs import config_path, errors_of, load_or_report, plural, problem_report
from gslbd.config import check_config


def run_check(path: str, allow_no_zones: bool = False) -> int:
    """Print every problem of the config at `path` (`problem_report`: errors first, each line starting
    with `error:` or `warning:`, then the count); 1 when there is an error, else 0. Beyond validation: a
    config without zones is an error (unless `allow_no_zones`), and so is a GeoIP database that cannot
    be used."""
    config, problems = check_config(path)
    if config is not None:
        problems = [*unusable(config, allow_no_zones=allow_no_zones), *problems]
        if any(p.severity == "error" for p in problems):
            config = None
    if errors_of(problems) or config is None:
        print("\n".join(problem_report(path, problems)))
        return 1
    for problem in problems:
        print(f"warning: {problem}")
    summary = f"{plural(len(config.zones), 'zone')}, {plural(len(config.services), 'service')}"
    if problems:
        summary += ", " + plural(len(problems), "warning")
    print(f"{path}: ok ({summary})")
    return 0


def _absolute(name: str) -> str:
    name = name.strip().lower()
    return name if name.endswith(".") else name + "."


def run_explain(path: str | None, name: str, rtype: str, client: str, ecs: str | None) -> int:
    """Print which config was read (the bundled example without `path`), then why `client` gets what it
    gets for (name, rtype) under it."""
    from gslbd.app import App
    from gslbd.explain import explain

    try:
        ipaddress.ip_address(client)
    except ValueError:
        print(f"gslbd explain: --client {client!r} is not an IP address", file=sys.stderr)
        return 2
    if ecs is not None:
        try:
            ipaddress.ip_network(ecs, strict=False)
        except ValueError:
            print(f"gslbd explain: --ecs {ecs!r} is not a subnet like 10.2.0.0/16", file=sys.stderr)
            return 2
    with config_path(path) as real:
        config, _ = load_or_report(real)
    if config is None:
        return 1
    app = App(config)
    source = f"config: {real}"
    if path is None:
        source += " (the bundled example; --config FILE explains another; a running server is not asked)"
    print(source)
    print(explain(config, app.view, app.env, _absolute(name), rtype.upper(), client, ecs).rstrip("\n"))
    return 0
