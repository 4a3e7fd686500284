"""The public SOA serial of each zone whose `soa.serial` is not configured (docs/configuration.md).

The serial is the Unix time (seconds) at which this process first served the zone's present data, and
grows (RFC 1982) whenever that data changes on a reload: the zone's records, nameservers, SOA fields,
TTLs and keys. A reload with the same zone data keeps the serial (so the incremental, services-only
rebuild stays possible). Services are not part of it: their answers change with health at every site on
its own, which no serial can describe. A configured `soa.serial` is served as it is.

Not kept across restarts and not equal between sites: a restart stamps its start time (larger than any
serial the previous run served while the clock moves forward), and each site stamps its own load time.
Set `soa.serial` (say from the deploy pipeline) for one serial at every site.
"""

from __future__ import annotations

from dataclasses import replace

from gslbd.exchange.zone import next_serial
from gslbd.model.config import Config
from gslbd.model.zone import Zone


def _data(zone: Zone) -> Zone:
    """The zone without its serial: what decides whether the serial moves."""
    return replace(zone, soa=replace(zone.soa, serial=0))


def stamp_serials(config: Config, previous: Config | None, wall: float) -> Config:
    """`config` with the serial of each automatic zone set: the previous one when the zone's data is
    the same as in `previous` (the running config), else the next serial at `wall`."""
    before = {z.origin: z for z in previous.zones} if previous is not None else {}
    zones = []
    for zone in config.zones:
        if not zone.soa.automatic:
            zones.append(zone)
            continue
        old = before.get(zone.origin)
        if old is not None and old.soa.automatic and _data(old) == _data(zone):
            serial = old.soa.serial
        elif old is not None:  # changed, or the serial was configured until now: never backwards
            serial = next_serial(old.soa.serial, wall, per_second=1)
        else:
            serial = int(wall) % 2**32
        zones.append(replace(zone, soa=replace(zone.soa, serial=serial)))
    return replace(config, zones=tuple(zones))
