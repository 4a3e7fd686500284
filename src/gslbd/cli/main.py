"""The `gslbd` command (also `python -m gslbd`). The CLI is the only place that prints or exits."""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

from gslbd import __version__
from gslbd.config.overrides import parse_listen
from gslbd.model.config import ListenAddress

if TYPE_CHECKING:
    _Sub = argparse._SubParsersAction[argparse.ArgumentParser]

# The commands defined in modules of their own: (module, its function that adds them, the commands it
# adds). A module is imported only when its command runs or the whole command line is shown (--help):
# `gslbd check` does not pay for DNS clients, HTTP clients or the event loop it never uses.
_REGISTERED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("gslbd.cli.demo", "add_parser", ("demo",)),
    ("gslbd.cli.admin", "register", ("status", "admin")),
    ("gslbd.cli.endpoints", "register", ("endpoints",)),
    ("gslbd.cli.doctor", "register", ("doctor",)),
    ("gslbd.cli.delegation", "register", ("delegation",)),
    ("gslbd.cli.dnssec", "register", ("dnssec",)),
    ("gslbd.cli.importer", "register", ("import",)),
    ("gslbd.cli.audit", "register", ("audit",)),
    ("gslbd.cli.whatif", "register", ("whatif",)),
)


_OWN = ("serve", "check", "explain", "version")  # the commands build_parser defines itself


def _wanted(argv: Sequence[str] | None) -> str | None:
    """The command a command line runs, when it names a known one first (then only that command's
    module needs loading); None for anything else (no command, an option such as --help first, a
    misspelt command, which is answered with the list of every command): load them all."""
    args = sys.argv[1:] if argv is None else argv
    known = {*_OWN, *(name for _, _, commands in _REGISTERED for name in commands)}
    return args[0] if args and args[0] in known else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line. With `only` (the command about to run), the modules of the other commands are
    not imported; their commands are missing from that parser, which is used only for `only`."""
    parser = argparse.ArgumentParser(
        prog="gslbd",
        description="Global server load balancer: an authoritative DNS server that answers with healthy, "
        "nearby endpoints.",
    )
    parser.add_argument("--version", action="version", version=f"gslbd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser(
        "serve", help="answer DNS (without --config: the bundled example on 127.0.0.1:5353)"
    )
    _config_option(serve)
    serve.add_argument(
        "--log-level",
        default=None,
        choices=["debug", "info", "warning", "error"],
        help="least severe log level shown (default: log.level of the config, else info)",
    )
    serve.add_argument(
        "--log-format",
        default=None,
        choices=["text", "json"],
        help="text, or one JSON object per line (default: log.format of the config, else text)",
    )
    serve.add_argument(
        "--listen",
        action="append",
        default=[],
        type=_listen_address,
        metavar="HOST:PORT",
        help="answer DNS here instead of dns.listen (repeatable; IPv6 as [::1]:53)",
    )

    check = sub.add_parser("check", help="validate a configuration and print every problem")
    _config_option(check, required=True)
    for command in (serve, check):
        command.add_argument(
            "--allow-no-zones",
            action="store_true",
            help="accept a configuration without zones (every query is then answered REFUSED)",
        )

    explain = sub.add_parser("explain", help="say what a client gets for a name, and why")
    explain.add_argument("name", help="the name asked, e.g. app.gslb.example.com")
    explain.add_argument("--type", "-t", default="A", dest="rtype", help="the type asked (default A)")
    explain.add_argument("--client", required=True, help="the client's address, e.g. 10.1.2.3")
    explain.add_argument("--ecs", default=None, help="an EDNS Client Subnet sent along, e.g. 10.2.0.0/16")
    _config_option(explain)

    for module, function, commands in _REGISTERED:
        if only is None or only in commands:
            register: Callable[[_Sub], None] = getattr(importlib.import_module(module), function)
            register(sub)
    sub.add_parser("version", help="print the version")
    return parser


def _config_option(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    parser.add_argument(
        "--config",
        "-c",
        required=required,
        default=None,
        metavar="FILE",
        help="the YAML configuration" + ("" if required else " (default: the bundled example)"),
    )


def _listen_address(text: str) -> ListenAddress:
    try:
        return parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# The exit code when the reader of our output went away (`gslbd status | head`): what a command killed
# by SIGPIPE reports in a shell (128 + 13), so `set -o pipefail` still sees that the output was cut.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code. Every command stops quietly (no traceback, exit
    code 141) when its output pipe is closed."""
    try:
        return _main(argv)
    except BrokenPipeError:
        if argv is None:  # this process is the command: nothing it still writes may fail again
            _discard_output()
        return EXIT_BROKEN_PIPE


def _discard_output() -> None:
    """Point stdout and stderr at /dev/null, so that the interpreter's flush at exit (of what was left
    in the buffers for the closed pipe) does not report the broken pipe once more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser(_wanted(argv))
    args = parser.parse_args(argv)
    if args.command is None:  # bare `gslbd`: what it can do
        parser.print_help()
        return 0
    if hasattr(args, "run"):  # commands that bring their own runner (status, admin)
        return int(args.run(args))
    if args.command == "version":
        print(f"gslbd {__version__}")
        return 0
    if args.command == "check":
        code = _check(args.config, args.allow_no_zones)
        if argv is None:  # this process is the command (not a caller running it): it is done
            _leave(code)
        return code
    if args.command == "explain":
        from gslbd.cli.commands import run_explain

        return run_explain(args.config, args.name, args.rtype, args.client, args.ecs)
    from gslbd.cli.serve import run_serve

    return run_serve(args.config, args.log_level, args.log_format, args.allow_no_zones, tuple(args.listen))


def _check(path: str, allow_no_zones: bool) -> int:
    """`gslbd check`, without the cyclic garbage collector: a configuration of 100,000 services is a few
    million objects, all alive until the command ends, which the collector would scan for cycles again
    and again (about 0.8 s of 3 at 100,000 services). What is left afterwards is frozen (never scanned
    again) for the callers that go on running, such as tests."""
    was = gc.isenabled()
    gc.disable()
    try:
        from gslbd.cli.commands import run_check

        return run_check(path, allow_no_zones)
    finally:
        if was:
            gc.freeze()
            gc.enable()


def _leave(code: int) -> NoReturn:
    """End the process now with `code`, output flushed: a config of 100,000 services checked is
    millions of objects that the interpreter would otherwise free one by one on its way out (about
    0.3 s of `gslbd check`), for nothing. Nothing else is pending: `check` starts no thread, opens no
    file it has not closed and registers no exit handler."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing more to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
