"""Automatic SOA serials (app/serials.py): kept while a zone's data is the same, grown (RFC 1982) when it
changes, never moved when configured."""

from __future__ import annotations

from dataclasses import replace

from gslbd.app.serials import stamp_serials
from gslbd.config import load_config_text
from gslbd.model.config import Config
from gslbd.model.zone import StaticRecord

TEXT = """\
zones:
  - origin: a.test.
    nameservers: [{name: ns1.a.test., address: 127.0.0.1}]
  - origin: b.test.
    soa: {serial: 7}
    nameservers: [{name: ns1.b.test., address: 127.0.0.1}]
services:
  - {name: app.a.test., endpoints: [{address: 192.0.2.1}]}
"""
WALL = 1_700_000_000.5


def serials(config: Config) -> list[int]:
    return [z.soa.serial for z in config.zones]


def with_record(config: Config) -> Config:
    zone = config.zones[0]
    record = StaticRecord("x.a.test.", "TXT", '"x"', 30)
    return replace(config, zones=(replace(zone, records=(record,)), *config.zones[1:]))


def test_a_first_load_is_stamped_with_the_clock_and_a_configured_serial_is_kept() -> None:
    assert serials(stamp_serials(load_config_text(TEXT), None, WALL)) == [1_700_000_000, 7]


def test_the_same_zone_data_keeps_its_serial_even_when_services_change() -> None:
    first = stamp_serials(load_config_text(TEXT), None, WALL)
    again = load_config_text(TEXT.replace("192.0.2.1", "192.0.2.2"))
    assert serials(stamp_serials(again, first, WALL + 100)) == [1_700_000_000, 7]


def test_changed_zone_data_gets_the_clock_or_one_more_when_the_clock_is_not_ahead() -> None:
    first = stamp_serials(load_config_text(TEXT), None, WALL)
    later = stamp_serials(with_record(load_config_text(TEXT)), first, WALL + 60)
    assert serials(later) == [1_700_000_060, 7]
    same_second = stamp_serials(with_record(load_config_text(TEXT)), first, WALL)
    assert serials(same_second) == [1_700_000_001, 7]
    clock_back = stamp_serials(with_record(load_config_text(TEXT)), first, WALL - 3600)
    assert serials(clock_back) == [1_700_000_001, 7]


def test_the_serial_wraps_in_serial_arithmetic() -> None:
    first = stamp_serials(load_config_text(TEXT), None, WALL)
    top = replace(first, zones=(replace(first.zones[0], soa=replace(first.zones[0].soa, serial=2**32 - 1)),))
    after = stamp_serials(with_record(load_config_text(TEXT)), top, 0.0)
    assert after.zones[0].soa.serial == 0
