"""Loading and validating gslbd configuration files.

    load_config(path) -> Config               raises ConfigError listing every error at once
    load_config_text(text, source) -> Config  the same for text in memory
    check_config(path) -> (Config | None, problems)   never raises ConfigError; errors first, then warnings

Every problem names the file, the line and the dotted field path (`services[0].endpoints[1].address`).
Relative file paths inside a config (api.token_file, topology.geoip.database, checks.*.ca_file) are
relative to the config file's directory (to the working directory for text in memory).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from gslbd.config.fields import Report
from gslbd.config.loader import Node, parse_yaml
from gslbd.config.overrides import apply_overrides
from gslbd.config.protect import secret_warnings
from gslbd.config.validate import build_config
from gslbd.config.yaml_fast import FastServices, read_fast
from gslbd.config.yaml_reload import recall, remember
from gslbd.errors import ConfigError, Problem
from gslbd.gcpause import collector_paused, keep_long_lived
from gslbd.model.config import Config

log = logging.getLogger(__name__)

# A config with more services than this is frozen out of the collector's reach once loaded: at 100,000
# services a full collection over what loading made pauses the process for seconds.
LARGE_CONFIG = 10_000


def _order(problems: list[Problem]) -> list[Problem]:
    """Errors first, then warnings; each group by line (file-level problems first), stable."""
    return sorted(problems, key=lambda p: (p.severity != "error", p.line or 0))


def check_config_text(
    text: str, source: str = "<string>", base_dir: str | os.PathLike[str] | None = None
) -> tuple[Config | None, list[Problem]]:
    """Validate configuration text: (the Config, or None when there are errors; every problem)."""
    config, problems, _ = _check(text, source, base_dir)
    return config, problems


def _check(
    text: str, source: str, base_dir: str | os.PathLike[str] | None, data: bytes | None = None
) -> tuple[Config | None, list[Problem], Node | None]:
    """(the Config or None, every problem, the parsed tree): the tree is parsed once and shared.
    `data`: the text as read from the file `source`: what it gives is remembered for the next load of
    that file, which then reads again only the services whose lines changed (config/yaml_reload.py)."""
    rep = Report(source, Path(base_dir) if base_dir is not None else Path.cwd())
    services: FastServices | None = None
    problems: list[Problem] = []
    recalled = recall(source, str(rep.base_dir), data, text) if data is not None else None
    if recalled is not None:
        tree, services = recalled
    elif (fast := read_fast(text, source)) is not None:
        tree, services = fast
    else:
        tree, problems = parse_yaml(text, source)
    rep.problems.extend(problems)
    if any(p.severity == "error" for p in problems) and tree is None:
        return None, _order(rep.problems), tree
    try:
        config = build_config(rep, tree, f"{rep.base_dir}\n{text}", services)
    except Exception as exc:  # a validator bug must still be a located answer, never a traceback
        log.exception("validating %s failed", source)
        rep.problems.append(Problem(source, None, "", f"the configuration could not be validated: {exc!r}"))
        return None, _order(rep.problems), tree
    if data is not None and services is not None:
        remember(source, str(rep.base_dir), data, tree, services)
    if rep.failed or config is None:
        return None, _order(rep.problems), tree
    return apply_overrides(config), _order(rep.problems), tree


def check_config(path: str | os.PathLike[str]) -> tuple[Config | None, list[Problem]]:
    """Validate a configuration file: (the Config, or None when there are errors; every problem).

    Never raises ConfigError: an unreadable file is a problem like any other.
    """
    source = os.fspath(path)
    try:
        data = Path(path).read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, [Problem(source, None, "", f"cannot read the configuration: {why}")]
    if "\r" in text:  # as read_text reads it (universal newlines)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        data = text.encode("utf-8")
    with collector_paused():
        config, problems, tree = _check(text, source, Path(path).resolve().parent, data)
        if config is not None and len(config.services) > LARGE_CONFIG:
            keep_long_lived()  # millions of objects that live on (gcpause.py)
    if config is not None:
        problems += secret_warnings(source, Path(path), tree, config)
    return config, problems


def _raise_or_return(config: Config | None, problems: list[Problem]) -> Config:
    errors = [p for p in problems if p.severity == "error"]
    if config is None or errors:
        raise ConfigError(errors)
    for problem in problems:
        log.warning("%s", problem)
    return config


def load_config(path: str | os.PathLike[str]) -> Config:
    """Load and validate a configuration file; raises ConfigError with every error. Warnings are logged."""
    return _raise_or_return(*check_config(path))


def load_config_text(text: str, source: str = "<string>") -> Config:
    """Load and validate configuration text; raises ConfigError with every error. Warnings are logged."""
    return _raise_or_return(*check_config_text(text, source))


__all__ = ["check_config", "check_config_text", "load_config", "load_config_text"]
