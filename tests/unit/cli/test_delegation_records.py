"""The records a parent zone needs for a gslbd zone: zone-file text, the RFC 2136 update, TSIG keys."""

from __future__ import annotations

from dataclasses import replace

import dns.name
import dns.rdatatype
import dns.update
import dns.zone
import pytest

from gslbd.cli.delegation_records import (
    Delegation,
    DelegationError,
    Glue,
    delegation_for,
    delegations,
    owned_by,
    parent_of,
    stale_names,
    update_message,
    zone_text,
)
from gslbd.config import load_config_text
from gslbd.config.tsig import TsigKeyError, parse_tsig_key, parse_tsig_key_file
from gslbd.model.tsig import TsigKey

SECRET = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="

CONFIG = """\
version: 1
site: {name: eu}
dns: {listen: ["127.0.0.1:5353"]}
zones:
  - origin: gslb.example.com.
    ttl: 60
    nameservers:
      - {name: gslb-ns-eu-gslb.example.com., address: 127.0.0.2}
      - {name: gslb-ns-us-gslb.example.com., addresses: [127.0.0.3, "fd00::3"]}
      - {name: ns1.gslb.example.com., address: 127.0.0.4}
      - {name: ns.example.net.}
      - {name: ns2.example.com.}
  - origin: other.example.org.
    nameservers:
      - {name: ns.other.example.org., address: 192.0.2.53}
services:
  - name: app.gslb.example.com.
    check: none
    endpoints: [{address: 192.0.2.1}]
"""


def config_delegations(
    zones: tuple[str, ...] | list[str] = (), parent: str | None = None, ttl: int | None = None
) -> tuple[Delegation, ...]:
    return delegations(load_config_text(CONFIG, "sites.yaml"), zones=zones, parent=parent, ttl=ttl)


def test_the_delegation_holds_every_nameserver_and_the_addresses_of_those_inside_the_parent() -> None:
    d = config_delegations(zones=["gslb.example.com"])[0]
    assert (d.zone, d.parent, d.ttl) == ("gslb.example.com.", "example.com.", 60)
    assert d.nameservers == (
        "gslb-ns-eu-gslb.example.com.",
        "gslb-ns-us-gslb.example.com.",
        "ns1.gslb.example.com.",
        "ns.example.net.",
        "ns2.example.com.",
    )
    assert d.glue == (
        Glue("gslb-ns-eu-gslb.example.com.", "A", "127.0.0.2"),
        Glue("gslb-ns-us-gslb.example.com.", "A", "127.0.0.3"),
        Glue("gslb-ns-us-gslb.example.com.", "AAAA", "fd00::3"),
        Glue("ns1.gslb.example.com.", "A", "127.0.0.4"),
    )
    assert d.outside == ("ns.example.net.",)
    assert d.missing == ("ns2.example.com.",)


def test_zone_text_is_one_absolute_record_a_line_with_comments_for_what_it_cannot_publish() -> None:
    text = zone_text(config_delegations(), "sites.yaml")
    assert text == (
        "; delegation of gslb.example.com. in its parent zone example.com. (from sites.yaml)\n"
        "gslb.example.com.\t60\tIN\tNS\tgslb-ns-eu-gslb.example.com.\n"
        "gslb.example.com.\t60\tIN\tNS\tgslb-ns-us-gslb.example.com.\n"
        "gslb.example.com.\t60\tIN\tNS\tns1.gslb.example.com.\n"
        "gslb.example.com.\t60\tIN\tNS\tns.example.net.\n"
        "gslb.example.com.\t60\tIN\tNS\tns2.example.com.\n"
        "gslb-ns-eu-gslb.example.com.\t60\tIN\tA\t127.0.0.2\n"
        "gslb-ns-us-gslb.example.com.\t60\tIN\tA\t127.0.0.3\n"
        "gslb-ns-us-gslb.example.com.\t60\tIN\tAAAA\tfd00::3\n"
        "ns1.gslb.example.com.\t60\tIN\tA\t127.0.0.4\n"
        "; ns.example.net. is outside example.com.: its addresses are published by its own zone\n"
        "; ns2.example.com. is inside example.com. but has no address in the config: add its A/AAAA there\n"
        "\n"
        "; delegation of other.example.org. in its parent zone example.org. (from sites.yaml)\n"
        "other.example.org.\t30\tIN\tNS\tns.other.example.org.\n"
        "ns.other.example.org.\t30\tIN\tA\t192.0.2.53\n"
    )


def test_zone_text_loads_into_the_parent_zone_as_a_zone_file() -> None:
    soa = "@ 300 IN SOA ns1.example.com. hostmaster.example.com. 1 3600 600 604800 300\n@ 300 IN NS ns1\n"
    text = zone_text(config_delegations(zones=["gslb.example.com."]))
    zone = dns.zone.from_text(soa + text, origin="example.com.", relativize=False)
    ns = zone.find_rrset("gslb.example.com.", dns.rdatatype.NS)
    assert ns.ttl == 60
    assert len(ns) == 5
    aaaa = zone.find_rrset("gslb-ns-us-gslb.example.com.", dns.rdatatype.AAAA)
    assert [r.to_text() for r in aaaa] == ["fd00::3"]


def test_parent_and_ttl_can_be_chosen_and_a_parent_must_hold_the_zone() -> None:
    d = config_delegations(zones=["gslb.example.com."], parent="com", ttl=600)[0]
    assert (d.parent, d.ttl, d.missing) == ("com.", 600, ("ns2.example.com.",))
    with pytest.raises(DelegationError, match=r"gslb.example.com. is not below the parent zone example.org."):
        config_delegations(parent="example.org.")
    with pytest.raises(
        DelegationError, match=r"gslb.example.com. is not below the parent zone gslb.example.com."
    ):
        config_delegations(parent="gslb.example.com.")


def test_an_unknown_zone_is_named_with_the_zones_the_config_has() -> None:
    with pytest.raises(DelegationError) as e:
        config_delegations(zones=["nope.example.com."])
    assert str(e.value) == (
        "zone nope.example.com. is not in the config (its zones: gslb.example.com., other.example.org.)"
    )


def test_parent_of_drops_the_first_label() -> None:
    assert parent_of("gslb.example.com.") == "example.com."
    assert parent_of("com.") == "."
    with pytest.raises(DelegationError):
        parent_of(".")


def test_a_delegation_owns_glue_below_the_zone_and_its_k8gb_style_names_only() -> None:
    zone = "cloud.example.com."
    assert owned_by("ns1.cloud.example.com.", zone)
    assert owned_by("gslb-ns-ap-cloud.example.com.", zone)
    assert owned_by("gslb-ns-ap-cloud-example-com.example.com.", zone)
    assert not owned_by("gslb-ns-ap-other.example.com.", zone)
    assert not owned_by("ns-other.example.com.", zone)


def sections(update: dns.update.UpdateMessage) -> list[str]:
    return sorted(rrset.to_text() for rrset in update.update)


def test_the_update_replaces_the_ns_set_and_glue_and_deletes_stale_owned_addresses() -> None:
    d = config_delegations(zones=["gslb.example.com."])[0]
    current = ["gslb-ns-ap-gslb.example.com.", "ns-other.example.com.", "gslb-ns-eu-gslb.example.com."]
    assert stale_names(d, current) == ("gslb-ns-ap-gslb.example.com.",)
    update = update_message(d, current_ns=current)
    assert update.zone[0].name == dns.name.from_text("example.com.")
    text = sections(update)
    assert "gslb.example.com. ANY NS" in text  # delete the whole NS set first
    assert "gslb.example.com. 60 IN NS ns.example.net." in text
    assert "gslb-ns-eu-gslb.example.com. ANY A" in text
    assert "gslb-ns-eu-gslb.example.com. 60 IN A 127.0.0.2" in text
    assert "gslb-ns-eu-gslb.example.com. ANY AAAA" in text  # an IPv4-only name loses any old AAAA
    assert "gslb-ns-us-gslb.example.com. 60 IN AAAA fd00::3" in text
    assert "gslb-ns-ap-gslb.example.com. ANY A" in text
    assert "gslb-ns-ap-gslb.example.com. ANY AAAA" in text
    assert not any(line.startswith("ns-other.") or line.startswith("ns2.") for line in text)
    assert not update.had_tsig
    signed = update_message(d, TsigKey("k.", SECRET))
    signed.to_wire()
    assert signed.had_tsig
    assert signed.keyname == dns.name.from_text("k.")


def test_tsig_keys_are_read_as_dig_writes_them_or_from_a_bind_key_file() -> None:
    assert parse_tsig_key(f"gslbd-update:{SECRET}") == TsigKey("gslbd-update.", SECRET, "hmac-sha256")
    assert parse_tsig_key(f"hmac-sha512:k:{SECRET}") == TsigKey("k.", SECRET, "hmac-sha512")
    assert parse_tsig_key(f"k:{SECRET}", "hmac-sha1").algorithm == "hmac-sha1"
    bind = f'key "gslbd-update" {{\n\talgorithm hmac-sha384;\n\tsecret "{SECRET}";\n}};\n'
    assert parse_tsig_key_file(bind) == TsigKey("gslbd-update.", SECRET, "hmac-sha384")
    assert parse_tsig_key_file(f"# comment\nk:{SECRET}\n") == TsigKey("k.", SECRET)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("just-a-name", "a TSIG key is NAME:SECRET or ALGORITHM:NAME:SECRET (secret in base64)"),
        ("k:not base64!", "the TSIG secret is not base64"),
        (f"hmac-sha3:k:{SECRET}", "unknown TSIG algorithm 'hmac-sha3'"),
        (f":{SECRET}", "the TSIG key name is empty"),
    ],
)
def test_bad_tsig_keys_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(TsigKeyError) as e:
        parse_tsig_key(text)
    assert str(e.value).startswith(message)


def test_a_key_whose_algorithm_contradicts_the_option_is_refused() -> None:
    with pytest.raises(TsigKeyError, match="the key says hmac-sha512 but --tsig-algorithm says hmac-sha256"):
        parse_tsig_key(f"hmac-sha512:k:{SECRET}", "hmac-sha256")


def test_a_zone_without_nameservers_cannot_be_delegated() -> None:
    config = load_config_text(CONFIG, "sites.yaml")
    zone = config.zones[0]
    with pytest.raises(DelegationError) as e:
        delegation_for(replace(zone, nameservers=()))
    assert str(e.value) == "zone gslb.example.com. has no nameservers to delegate to"
