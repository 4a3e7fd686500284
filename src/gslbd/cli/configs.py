"""Finding and loading the configuration for a command; printing its problems."""

from __future__ import annotations

import sys
from collections.abc import Iterator
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


def load_or_report(path: str) -> tuple[Config | None, list[Problem]]:
    """The config at `path`, or None after printing every problem to stderr (errors first).
    Returns the warnings of a config that loaded.

    The cyclic collector is paused for the whole load (the checks after validation included), and
    what the load made is then kept out of its reach (gcpause.py), as `gslbd check` and the rest of
    the start do: a config of 100,000 services is millions of objects that live as long as it."""
    with collector_paused():
        config, problems = check_config(path)
    if config is not None:
        keep_long_lived()
    if config is None or errors_of(problems):
        for problem in _errors_first(problems):
            print(problem, file=sys.stderr)
        if config is None and not problems:
            print(f"{path}: could not be loaded", file=sys.stderr)
        return None, problems
    return config, problems


def _errors_first(problems: list[Problem]) -> list[Problem]:
    return errors_of(problems) + [p for p in problems if p.severity != "error"]
