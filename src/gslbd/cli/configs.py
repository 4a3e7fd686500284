"""Finding and loading the configuration for a command; printing its problems."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources

from gslbd.config import check_config
from gslbd.errors import Problem
from gslbd.gcpause import collector_paused, keep_long_lived
from gslbd.model.config import Config

EXAMPLE = "example.yaml"


@contextmanager
def config_path(path: str | None) -> Iterator[str]:
    """The given path, or a filesystem path of the bundled example when `path` is None."""
    if path is not None:
        yield path
        return
    with resources.as_file(resources.files("gslbd") / "examples" / EXAMPLE) as real:
        yield str(real)


def errors_of(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def problem_report(path: str, problems: list[Problem], extra_errors: Sequence[str] = ()) -> list[str]:
    """The lines `gslbd check` and `gslbd serve` print for a config with problems: every error, then
    every warning, each marked `error:` or `warning:`, and the count (`<path>: 2 errors, 1 warning`).
    `extra_errors`: error lines that are not Problems (a check this process cannot run)."""
    errors = errors_of(problems)
    warnings = [p for p in problems if p.severity != "error"]
    lines = [f"error: {e}" for e in [*map(str, errors), *extra_errors]]
    lines += [f"warning: {w}" for w in warnings]
    summary = plural(len(errors) + len(extra_errors), "error")
    if warnings:
        summary += ", " + plural(len(warnings), "warning")
    return [*lines, f"{path}: {summary}"]


def load_or_report(path: str) -> tuple[Config | None, list[Problem]]:
    """The config at `path`, or None after printing its problems to stderr (`problem_report`).
    Returns the warnings of a config that loaded.

    The cyclic collector is paused for the whole load (the checks after validation included), and
    what the load made is then kept out of its reach (gcpause.py), as `gslbd check` and the rest of
    the start do: a config of 100,000 services is millions of objects that live as long as it."""
    with collector_paused():
        config, problems = check_config(path)
    if config is not None:
        keep_long_lived()
    if config is None or errors_of(problems):
        if config is None and not problems:
            print(f"{path}: could not be loaded", file=sys.stderr)
        else:
            print("\n".join(problem_report(path, problems)), file=sys.stderr)
        return None, problems
    return config, problems
