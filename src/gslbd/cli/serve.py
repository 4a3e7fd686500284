"""`gslbd serve`: answer DNS until SIGINT or SIGTERM, then stop cleanly. SIGHUP reloads the config.

Stopping: the first SIGTERM/SIGINT starts the lame duck (`dns.lame_duck` seconds, /readyz 503 while DNS
still answers), then listeners, API and probes stop; a second signal stops at once. Exit code 0.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import sys
from collections.abc import Callable

from gslbd import __version__
from gslbd.app import ApiBindError, App, privilege_problems, unusable
from gslbd.app.startup import server_file_store
from gslbd.cli.configs import config_path, load_or_report, problem_report
from gslbd.cli.sdnotify import Notifier
from gslbd.config.overrides import set_listen
from gslbd.errors import GslbdError, StateError
from gslbd.gcpause import keep_long_lived
from gslbd.model.config import Config, ListenAddress, LogConfig
from gslbd.server import logsetup
from gslbd.server.privileges import PrivilegeError, resolve
from gslbd.state.store import StateStore, default_state_dir

log = logging.getLogger("gslbd.cli.serve")


def setup_logging(level: str, fmt: str = "text") -> int:
    """Log to stderr at `level` ("debug" ... "error") in `fmt` ("text" or "json"); the numeric level."""
    return logsetup.setup_logging(level, fmt)


def effective_logging(config: Config, level: str | None, fmt: str | None) -> tuple[str, str]:
    """(level, format): the command line's when given, else the config's `log` section."""
    return level or config.log.level.value, fmt or config.log.format.value


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


def low_port_hint(exc: BaseException, config: Config) -> str | None:
    """What to do when binding a port below 1024 was refused (EACCES), or None for other failures."""
    denied = (isinstance(exc, OSError) and exc.errno == errno.EACCES) or "[Errno 13]" in str(exc)
    ports = [a.port for a in config.dns.listen] + ([config.api.listen.port] if config.api else [])
    low = sorted({p for p in ports if 0 < p < 1024})
    if not denied or not low:
        return None
    return (
        f"gslbd: port {', '.join(map(str, low))} is below 1024: binding it needs root or the "
        "CAP_NET_BIND_SERVICE capability. Run gslbd from the systemd unit (deploy/systemd/gslbd.service "
        "grants AmbientCapabilities=CAP_NET_BIND_SERVICE to an unprivileged user), or start it as root "
        "with `run_as: {user: gslbd}` in the config (it binds, then drops to that user), or listen on a "
        "port >= 1024 (gslbd serve --listen 127.0.0.1:5353). See docs/deploy.md."
    )


def run_serve(
    path: str | None,
    level: str | None,
    fmt: str | None = None,
    allow_no_zones: bool = False,
    listen: tuple[ListenAddress, ...] = (),
) -> int:
    """Load the config (or the bundled example), serve until a stop signal; the exit code. `level` and
    `fmt` (--log-level, --log-format) win over the config's `log.level` and `log.format` when given;
    `listen` (from --listen) replaces dns.listen, at start and at every reload."""
    setup_logging(level or "info", fmt or "text")
    set_listen(listen)
    with config_path(path) as real:
        config, problems = load_or_report(real)
    if config is None:
        return 1
    numeric = setup_logging(*effective_logging(config, level, fmt))
    cannot_run = privilege_problems(config)
    refused = unusable(config, allow_no_zones=allow_no_zones)
    if cannot_run or refused:  # the lines `gslbd check` prints, warnings included
        print("\n".join(problem_report(real, refused + problems, cannot_run)), file=sys.stderr)
        return 1
    for warning in problems:
        log.warning("%s", warning)
    if config.run_as is not None:
        try:
            resolve(config.run_as)  # refuse an unknown user before binding anything
        except PrivilegeError as exc:
            print(f"gslbd: {exc}", file=sys.stderr)
            return 1
    store: StateStore | None = None
    if path is None and config.state.file is None:
        # The bundled example keeps its admin states next to the user's other state.
        store = server_file_store(default_state_dir() / "example-state.json")
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        app = App(config, worker_log_level=numeric, store=store)
        return runner.run(serve_until_stopped(app, path, log_options=(level, fmt)))


async def serve_until_stopped(
    app: App,
    path: str | None = None,
    banner: bool = True,
    log_options: tuple[str | None, str | None] | None = None,
    notifier: Notifier | None = None,
) -> int:
    """Start `app` and serve until SIGTERM or SIGINT; SIGHUP reloads its config file. The first stop
    signal starts the lame duck (dns.lame_duck seconds: not ready, DNS still answers), a second one
    stops at once. Returns the exit code (0, or 1 when the app could not start). With `log_options`
    (--log-level, --log-format or None each), a reload applies the new `log` section's level and format.
    Under systemd (NOTIFY_SOCKET) the states go to the service manager: READY=1 once answering,
    RELOADING=1 / READY=1 around each reload, STOPPING=1, and WATCHDOG=1 when WatchdogSec= is set."""
    loop = asyncio.get_running_loop()
    notify = notifier if notifier is not None else Notifier.from_environment()
    config = app.config
    # Signals are handled from the start: a SIGHUP or SIGTERM that arrives while the sockets are being
    # bound (or the workers started) waits in the queue instead of killing the process half-started.
    commands: asyncio.Queue[str] = asyncio.Queue()
    for sig, command in ((signal.SIGINT, "stop"), (signal.SIGTERM, "stop"), (signal.SIGHUP, "reload")):
        loop.add_signal_handler(sig, commands.put_nowait, command)
    try:
        try:
            await app.start()
        except (OSError, GslbdError) as exc:
            listen = ", ".join(map(str, config.dns.listen))
            if isinstance(exc, StateError | ApiBindError | PrivilegeError):
                print(f"gslbd: {exc}", file=sys.stderr)
            else:
                print(f"gslbd: cannot listen on {listen}: {exc}", file=sys.stderr)
            hint = low_port_hint(exc, config)
            if hint is not None:
                print(hint, file=sys.stderr)
            return 1
        # What the start built (config, tables) lives long: keep it out of the collector's full passes,
        # which would otherwise pause a rebuild for 50-150 ms with 1,000 endpoints.
        keep_long_lived()
        log.info("gslbd %s answering for %s", __version__, ", ".join(z.origin for z in config.zones))
        if path is None and banner:
            log.info("%s", try_these(config))
        notify.ready(f"answering on {', '.join(app.bound)}")
        notify.start_watchdog(loop)
        while await commands.get() == "reload":
            before = app.config.log
            notify.reloading()
            errors = await app.reload_file()
            if log_options is not None:
                _follow_log_section(before, app.config, *log_options)
            notify.ready("reload refused, serving the previous config" if errors else "reloaded")
        log.info("stopping")
        notify.stopping()
        await _lame_duck(app, commands)
    finally:
        notify.stop_watchdog()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        await app.stop()
        log.info("stopped")
    return 0


async def _lame_duck(app: App, commands: asyncio.Queue[str]) -> None:
    """Not ready for dns.lame_duck seconds while DNS still answers, unless a second stop signal comes."""
    seconds = app.config.dns.lame_duck
    if seconds <= 0:
        return
    app.lame_duck()
    log.info("lame duck for %gs: DNS still answers, /readyz fails; signal again to stop now", seconds)
    deadline = loop_time() + seconds
    while (left := deadline - loop_time()) > 0:
        try:
            command = await asyncio.wait_for(commands.get(), left)
        except TimeoutError:
            return
        if command == "stop":
            log.info("second stop signal: stopping now")
            return


def _follow_log_section(before: LogConfig, config: Config, level: str | None, fmt: str | None) -> None:
    """After a reload: this process logs at the new level and format (workers at their next start); a new
    dnstap section needs a restart, since the DNS listeners hold their handler."""
    after = config.log
    if (after.level, after.format) != (before.level, before.format):
        setup_logging(*effective_logging(config, level, fmt))
    if after.dnstap != before.dnstap:
        log.warning("log.dnstap changes take effect at the next restart")


def loop_time() -> float:
    return asyncio.get_running_loop().time()
