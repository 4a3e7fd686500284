"""An admin selector: which endpoints a change by site, region, service or address applies to.

    parse_admin("site=eu region=eu-west service=*.example.com. address=192.0.2.0/24 down")
        -> AdminChange(Selector(...), AdminState.DOWN)
    Selector.matches(endpoint)     every key given must match (AND)

Keys: `site` and `region` are compared exactly; `service` is a glob over the service's name (the final
dot is optional); `address` is a network (192.0.2.0/24, 2001:db8::/48, or one address) that an IP
endpoint lies in, or else a text prefix of the endpoint's address (a hostname endpoint: `lb.`).
"""

from __future__ import annotations

import fnmatch
import ipaddress
from dataclasses import dataclass

from gslbd.model.service import Endpoint
from gslbd.types import AdminState

KEYS = ("site", "region", "service", "address")
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Selector:
    site: str | None = None
    region: str | None = None
    service: str | None = None
    address: str | None = None

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
        return " ".join(f"{key}={getattr(self, key)}" for key in KEYS if getattr(self, key) is not None)


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
    values: dict[str, str] = {}
    for word in words[:-1]:
        key, sep, value = word.partition("=")
        if not sep or not value:
            raise ValueError(f"{text!r}: {word!r} is not KEY=VALUE")
        if key not in KEYS:
            raise ValueError(f"{text!r}: unknown key {key!r} (keys: {', '.join(KEYS)})")
        if key in values:
            raise ValueError(f"{text!r}: {key} given twice")
        values[key] = value
    selector = Selector(**values)
    if selector.empty:
        raise ValueError(f"{text!r}: an empty selector would change every endpoint; name a key")
    return AdminChange(selector, state)
