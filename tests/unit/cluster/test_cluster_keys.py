"""Cluster mode's Redis names, TTLs and messages: exactly the ones behaviour.md and the seed give."""

from __future__ import annotations

import json

import pytest

from gslbd.cluster.keys import (
    AdminUpdate,
    ClusterKeys,
    HealthUpdate,
    admin_field,
    decode_admin_update,
    decode_health_update,
    encode_admin_update,
    encode_health_update,
    health_ttl,
    health_value,
    lock_ttl,
    millis,
    parse_admin_hash,
    parse_health_value,
)
from gslbd.types import AdminState

ZONE = "gslb.example.com."
APP = "app.gslb.example.com."


def test_lock_and_health_keys_are_prefix_kind_zone_fqdn_address_with_trailing_dots() -> None:
    keys = ClusterKeys("gslb:")
    assert (
        keys.lock(ZONE, APP, "192.0.2.10") == "gslb:lock:gslb.example.com.:app.gslb.example.com.:192.0.2.10"
    )
    assert keys.health(ZONE, APP, "2001:db8::10") == (
        "gslb:health:gslb.example.com.:app.gslb.example.com.:2001:db8::10"
    )
    assert keys.updates == "gslb:health:updates"
    assert keys.admin == "gslb:admin"
    assert keys.admin_updates == "gslb:admin:updates"


def test_the_key_prefix_is_used_verbatim() -> None:
    keys = ClusterKeys("site-a/")
    assert (
        keys.lock(ZONE, APP, "192.0.2.10") == "site-a/lock:gslb.example.com.:app.gslb.example.com.:192.0.2.10"
    )
    assert keys.updates == "site-a/health:updates"


@pytest.mark.parametrize(
    ("interval", "lock", "health"),
    [(10.0, 5.0, 20.0), (5.0, 2.5, 10.0), (4.0, 2.0, 8.0), (1.0, 2.0, 2.0), (0.2, 2.0, 0.4)],
)
def test_lock_ttl_is_half_the_interval_but_at_least_2s_and_health_ttl_is_twice_the_interval(
    interval: float, lock: float, health: float
) -> None:
    assert lock_ttl(interval) == lock
    assert health_ttl(interval) == health


def test_ttls_are_written_in_whole_milliseconds() -> None:
    assert millis(2.5) == 2500
    assert millis(0.4) == 400
    assert millis(0.0001) == 1


def test_health_values_are_1_and_0_and_nothing_else_parses() -> None:
    assert health_value(True) == "1"
    assert health_value(False) == "0"
    assert parse_health_value("1") is True
    assert parse_health_value("0") is False
    assert parse_health_value(None) is None
    assert parse_health_value("true") is None


def test_health_update_message_is_compact_json_in_the_seed_order() -> None:
    text = encode_health_update(HealthUpdate(ZONE, APP, "192.0.2.10", False))
    assert text == (
        '{"zone":"gslb.example.com.","fqdn":"app.gslb.example.com.","address":"192.0.2.10","alive":false}'
    )
    assert decode_health_update(text) == HealthUpdate(ZONE, APP, "192.0.2.10", False)


def test_a_health_update_from_another_implementation_decodes_whatever_the_spacing() -> None:
    text = json.dumps({"alive": True, "address": "192.0.2.10", "fqdn": APP, "zone": ZONE, "extra": 1})
    assert decode_health_update(text.encode()) == HealthUpdate(ZONE, APP, "192.0.2.10", True)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        '{"zone":"z.","fqdn":"a.z.","address":"192.0.2.1"}',
        '{"zone":"z.","fqdn":"a.z.","address":"192.0.2.1","alive":1}',
        '{"zone":"z.","fqdn":7,"address":"192.0.2.1","alive":true}',
        b"\xff\xfe",
    ],
)
def test_messages_that_are_not_health_updates_decode_to_none(text: str | bytes) -> None:
    assert decode_health_update(text) is None


def test_admin_update_message_and_hash_field() -> None:
    update = AdminUpdate(APP, "192.0.2.10", AdminState.DOWN)
    assert (
        encode_admin_update(update)
        == '{"fqdn":"app.gslb.example.com.","address":"192.0.2.10","state":"down"}'
    )
    assert decode_admin_update(encode_admin_update(update)) == update
    assert decode_admin_update('{"fqdn":"a.","address":"192.0.2.1","state":"sideways"}') is None
    assert admin_field((APP, "192.0.2.10")) == "app.gslb.example.com.|192.0.2.10"


def test_admin_hash_entries_that_do_not_parse_are_skipped() -> None:
    entries = {
        "app.gslb.example.com.|192.0.2.10": "down",
        "app.gslb.example.com.|2001:db8::10": "obey",
        "no-separator": "up",
        "app.gslb.example.com.|192.0.2.11": "sideways",
    }
    assert parse_admin_hash(entries) == {
        (APP, "192.0.2.10"): AdminState.DOWN,
        (APP, "2001:db8::10"): AdminState.OBEY,
    }
