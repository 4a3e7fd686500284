"""An admin selector: which endpoints a change by site, region, service or address applies to.

    parse_admin("site=eu region=eu-west service=*.example.com. address=192.0.2.0/24 tag=canary down")
        -> AdminChange(Selector(...), AdminState.DOWN)
    Selector.matches(endpoint)     every key given must match (AND)
    selector_of(mapping)           from a JSON object (PUT /api/v1/admin's "selector"), ValueError naming
                                   the fault

Keys: `site` and `region` are compared exactly; `service` is a glob over the service's name (the final
dot is optional); `address` is a network (192.0.2.0/24, 2001:db8::/48, or one address) that an IP
endpoint lies in, or else a text prefix of the endpoint's address (a hostname endpoint: `lb.`);
`tags` are tags the endpoint must all have (`endpoints[].tags`; `tag=a,b` in the text form).
"""

from __future__ import annotations

import fnmatch
import ipaddress
from dataclasses import dataclass

from gslbd.model.service import Endpoint
from gslbd.types import AdminState

KEYS = ("site", "region", "service", "address", "tags")
_TEXT_KEYS = {"tag": "tags", **{key: key for key in KEYS if key != "tags"}}
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Selector:
    site: str | None = None
    region: str | None = None
    service: str | None = None
    address: str | None = None
    tags: tuple[str, ...] | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, key) is None for key in KEYS)

    def _network(self) -> _Network | None:
        if self.address is None:
            return None
        try:
            return ipaddress.ip_network(self.address, strict=False)
        except ValueError:
            return None

    def matches(self, endpoint: Endpoint) -> bool:
        if self.site is not None and endpoint.site != self.site:
            return False
        if self.region is not None and endpoint.locality.region != self.region:
            return False
        if self.service is not None:
            pattern = self.service.lower()
            name = endpoint.service
            if not (fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name.rstrip("."), pattern)):
                return False
        if self.tags is not None and not all(tag in endpoint.tags for tag in self.tags):
            return False
        if self.address is not None:
            network = self._network()
            if network is None:
                return endpoint.address.startswith(self.address.lower())
            try:
                return ipaddress.ip_address(endpoint.address) in network
            except ValueError:  # a hostname endpoint is in no network
                return False
        return True

    def text(self) -> str:
        words = [f"{key}={getattr(self, key)}" for key in KEYS[:-1] if getattr(self, key) is not None]
        if self.tags is not None:
            words.append("tag=" + ",".join(self.tags))
        return " ".join(words)

    def json(self) -> dict[str, object]:
        out: dict[str, object] = {key: getattr(self, key) for key in KEYS if getattr(self, key) is not None}
        if self.tags is not None:
            out["tags"] = list(self.tags)
        return out


def selector_of(given: object) -> Selector:
    """A selector from a JSON object {"site": "eu", "tags": ["canary"], ...}. ValueError naming the fault:
    not an object, an unknown key, a value of the wrong type, or no key at all."""
    if not isinstance(given, dict):
        raise ValueError('selector must be an object like {"site": "eu"}')
    unknown = sorted(set(given) - set(KEYS))
    if unknown:
        raise ValueError(f"selector: unknown key {unknown[0]!r} (keys: {', '.join(KEYS)})")
    values: dict[str, object] = {}
    for key, value in given.items():
        if key == "tags":
            if not isinstance(value, list) or not value or not all(isinstance(t, str) and t for t in value):
                raise ValueError("selector.tags must be a non-empty list of tags")
            values[key] = tuple(value)
        elif not isinstance(value, str) or not value.strip():
            raise ValueError(f"selector.{key} must be a non-empty string")
        else:
            values[key] = value.strip()
    selector = Selector(**values)  # type: ignore[arg-type]
    if selector.empty:
        raise ValueError("an empty selector would change every endpoint; name a key")
    return selector


@dataclass(frozen=True, slots=True)
class AdminChange:
    selector: Selector
    state: AdminState


def parse_admin(text: str) -> AdminChange:
    """`KEY=VALUE ... STATE` (at least one key; STATE up, down or obey). ValueError naming the fault."""
    words = text.split()
    states = ", ".join(s.value for s in AdminState)
    if not words or "=" in words[-1]:
        raise ValueError(f"{text!r}: ends with no state ({states})")
    try:
        state = AdminState(words[-1].lower())
    except ValueError:
        raise ValueError(f"{text!r}: {words[-1]!r} is not a state ({states})") from None
    values: dict[str, object] = {}
    for word in words[:-1]:
        key, sep, value = word.partition("=")
        if not sep or not value:
            raise ValueError(f"{text!r}: {word!r} is not KEY=VALUE")
        if key not in _TEXT_KEYS:
            raise ValueError(f"{text!r}: unknown key {key!r} (keys: {', '.join(_TEXT_KEYS)})")
        field = _TEXT_KEYS[key]
        if field in values:
            raise ValueError(f"{text!r}: {key} given twice")
        values[field] = tuple(t for t in value.split(",") if t) if field == "tags" else value
    selector = Selector(**values)  # type: ignore[arg-type]
    if selector.empty:
        raise ValueError(f"{text!r}: an empty selector would change every endpoint; name a key")
    return AdminChange(selector, state)
