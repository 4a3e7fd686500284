"""Command-line overrides that hold for every configuration this process loads.

`gslbd serve --listen HOST:PORT` replaces `dns.listen`, at start and at every reload (SIGHUP re-reads the
file, and the override must survive that, or the reload would see a listen change that never happened).
Only `serve` sets them; `check`, `explain` and tests leave them empty, so a loaded file means what it says.
"""

from __future__ import annotations

from dataclasses import replace

from gslbd.config.fields import Invalid
from gslbd.config.names import parse_hostport
from gslbd.model.config import Config, ListenAddress

_listen: tuple[ListenAddress, ...] = ()


def parse_listen(text: str) -> ListenAddress:
    """`HOST:PORT` or `[V6]:PORT` (port 0 = any free port); ValueError with the reason."""
    try:
        return parse_hostport(text, None, min_port=0)
    except Invalid as exc:
        raise ValueError(str(exc)) from None


def set_listen(addresses: tuple[ListenAddress, ...]) -> None:
    """Answer on `addresses` instead of the file's dns.listen (empty: the file's)."""
    global _listen
    _listen = tuple(dict.fromkeys(addresses))


def apply_overrides(config: Config) -> Config:
    if _listen and config.dns.listen != _listen:
        return replace(config, dns=replace(config.dns, listen=_listen))
    return config
