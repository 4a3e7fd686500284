"""`gslbd serve`: answer DNS until SIGINT or SIGTERM, then stop cleanly. SIGHUP reloads the config."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable

from gslbd import __version__
from gslbd.app import App
from gslbd.cli.configs import config_path, load_or_report
from gslbd.errors import GslbdError
from gslbd.model.config import Config

log = logging.getLogger("gslbd.cli.serve")

LOG_FORMAT = "%(asctime)s gslbd %(levelname)s %(name)s: %(message)s"


def setup_logging(level: str) -> int:
    """Log to stderr at `level` ("debug" ... "error"); returns the numeric level."""
    numeric = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(level=numeric, format=LOG_FORMAT, stream=sys.stderr, force=True)
    return int(numeric)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed, else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def try_these(config: Config) -> str:
    """dig commands that show the bundled example at work."""
    addr = config.dns.listen[0]
    at = f"@{addr.host} -p {addr.port}"
    zone = config.zones[0].origin if config.zones else "gslb.example.com."
    lines = [
        f"dig {at} app.{zone} A",
        f"dig {at} failover.{zone} A",
        f"dig {at} geo.{zone} A +subnet=10.1.0.0/16",
        f"dig {at} geo.{zone} A +subnet=10.2.0.0/16",
        f"dig {at} app.{zone} MX",
        f"gslbd explain geo.{zone} --client 10.2.3.4",
    ]
    return "serving the bundled example; try:\n    " + "\n    ".join(lines)


def run_serve(path: str | None, level: str) -> int:
    """Load the config (or the bundled example), serve until a stop signal; the exit code."""
    numeric = setup_logging(level)
    with config_path(path) as real:
        config, problems = load_or_report(real)
    if config is None:
        return 1
    for warning in problems:
        log.warning("%s", warning)
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(_serve(config, path, numeric))


async def _serve(config: Config, path: str | None, level: int) -> int:
    loop = asyncio.get_running_loop()
    # Signals are handled from the start: a SIGHUP or SIGTERM that arrives while the sockets are being
    # bound (or the workers started) waits in the queue instead of killing the process half-started.
    commands: asyncio.Queue[str] = asyncio.Queue()
    for sig, command in ((signal.SIGINT, "stop"), (signal.SIGTERM, "stop"), (signal.SIGHUP, "reload")):
        loop.add_signal_handler(sig, commands.put_nowait, command)
    app = App(config, worker_log_level=level)
    try:
        try:
            await app.start()
        except (OSError, GslbdError) as exc:
            listen = ", ".join(map(str, config.dns.listen))
            print(f"gslbd: cannot listen on {listen}: {exc}", file=sys.stderr)
            return 1
        log.info("gslbd %s answering for %s", __version__, ", ".join(z.origin for z in config.zones))
        if path is None:
            log.info("%s", try_these(config))
        while await commands.get() == "reload":
            _reload(app, path)
        log.info("stopping")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        await app.stop()
    return 0


def _reload(app: App, path: str | None) -> None:
    with config_path(path) as real:
        config, problems = load_or_report(real)
    if config is None:
        log.error(
            "reload of %s failed (%d problems, printed above); still serving the previous config",
            real,
            len(problems),
        )
        return
    app.reload(config)
    log.info("reloaded %s", real)
