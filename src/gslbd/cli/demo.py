"""`gslbd demo`: three local HTTP backends, the bundled demo config with real health checks against
them, and a live line whenever an answer changes.

The bundled `examples/demo.yaml` is copied with the ports actually used (DNS, API, backends) to
`<state dir>/demo/demo.yaml` ($XDG_STATE_HOME/gslbd, else ~/.local/state/gslbd) and served from there,
so SIGHUP and `gslbd admin` act on it as on any config; its admin states go to `demo-state.json` beside
it and survive a restart.
"""

from __future__ import annotations

import argparse
import asyncio


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="serve a demo with local backends and live health checks")
    demo.add_argument("--port", type=int, default=5353, help="DNS port on 127.0.0.1 (default 5353)")
    demo.add_argument(
        "--api-port", type=int, default=8080, help="admin API port on 127.0.0.1 (default 8080; 0 = any)"
    )
    demo.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="least severe log level shown (default warning)",
    )
    demo.set_defaults(run=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Run `gslbd demo` with parsed arguments; the exit code."""
    from gslbd.cli.demo_run import demo
    from gslbd.cli.serve import loop_factory, setup_logging

    level = setup_logging(args.log_level)
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(demo(args.port, args.api_port, level))
