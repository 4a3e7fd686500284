"""Static records of the types gslbd computes (keys, signatures, denials, DS) are refused, located.

gslbd is the only server and signer of its zones: a static DNSKEY at the apex of a signed zone would replace
the real key set, so every type it makes is a config error in signed and unsigned zones alike, and a static
DS is only accepted at a delegation point (a name below the apex with a static NS set)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gslbd.cli.main import main
from gslbd.config import check_config_text
from gslbd.config.dnssec import generate_key_pair

ORIGIN = "gslb.example.com."
DIGEST = "ab" * 32
VALUES = {
    "DNSKEY": "257 3 13 " + "A" * 88,
    "CDNSKEY": "257 3 13 " + "A" * 88,
    "CDS": f"12345 13 2 {DIGEST}",
    "DS": f"12345 13 2 {DIGEST}",
    "RRSIG": "A 13 3 30 20300101000000 20200101000000 12345 gslb.example.com. " + "A" * 88,
    "NSEC": "z.gslb.example.com. A RRSIG NSEC",
    "NSEC3": "1 0 0 - 2T7B4G4VSA5SMI47K61MV5BV1A22BOJR A",
    "NSEC3PARAM": "1 0 0 -",
}
KEY_REASON = "records are made from the zone's dnssec keys"
SIGNER_REASON = "records are made by gslbd when it signs answers and proves denials"
SIGNED_WHY = {
    "DNSKEY": "; a static set would replace the real one and break validation of the zone",
    "RRSIG": "; a static one would contradict them",
}
UNSIGNED_WHY = " (gslbd is the only signer of its zones); this zone is unsigned, so it has none"


def zone(records: str, dnssec: str = "") -> str:
    head = f"zones:\n  - origin: {ORIGIN}\n    nameservers: [{{name: ns1, address: 127.0.0.2}}]\n"
    return head + dnssec + "    records:\n" + records


def record(name: str, rtype: str) -> str:
    return f"      - {{name: '{name}', type: {rtype}, value: '{VALUES[rtype]}'}}\n"


def errors(text: str, base: Path) -> list[str]:
    config, problems = check_config_text(text, "c.yaml", base)
    found = [str(p) for p in problems if p.severity == "error"]
    assert (config is None) == bool(found)
    return found


@pytest.fixture
def signing(tmp_path: Path) -> str:
    key = generate_key_pair(ORIGIN, 13, True, tmp_path)
    return f"    dnssec: {{keys: [{key.name}]}}\n"


def reason(rtype: str, signed: bool) -> str:
    made = f"{rtype} " + (KEY_REASON if rtype in ("DNSKEY", "CDS", "CDNSKEY") else SIGNER_REASON)
    if not signed:
        return made + UNSIGNED_WHY
    return made + SIGNED_WHY["DNSKEY" if rtype in ("DNSKEY", "CDS", "CDNSKEY") else "RRSIG"]


COMPUTED = ["DNSKEY", "CDS", "CDNSKEY", "RRSIG", "NSEC", "NSEC3", "NSEC3PARAM"]


@pytest.mark.parametrize("name", ["@", "www"])
@pytest.mark.parametrize("rtype", COMPUTED)
def test_a_computed_type_in_a_signed_zone_is_an_error_at_its_type(
    tmp_path: Path, signing: str, rtype: str, name: str
) -> None:
    text = zone(record(name, rtype), signing)
    assert errors(text, tmp_path) == [f"c.yaml:6: zones[0].records[0].type: {reason(rtype, True)}"]


@pytest.mark.parametrize("rtype", COMPUTED)
def test_a_computed_type_in_an_unsigned_zone_is_an_error_saying_gslbd_is_the_signer(
    tmp_path: Path, rtype: str
) -> None:
    text = zone(record("www", rtype))
    assert errors(text, tmp_path) == [f"c.yaml:5: zones[0].records[0].type: {reason(rtype, False)}"]


def test_the_exact_text_for_a_static_apex_dnskey_in_a_signed_zone(tmp_path: Path, signing: str) -> None:
    assert errors(zone(record("@", "DNSKEY"), signing), tmp_path) == [
        "c.yaml:6: zones[0].records[0].type: DNSKEY records are made from the zone's dnssec keys; "
        "a static set would replace the real one and break validation of the zone"
    ]


@pytest.mark.parametrize("signed", [False, True])
def test_a_ds_at_a_delegation_point_is_accepted(tmp_path: Path, signing: str, signed: bool) -> None:
    records = "      - {name: sub, type: NS, value: ns1.example.net.}\n" + record("sub", "DS")
    config, problems = check_config_text(zone(records, signing if signed else ""), "c.yaml", tmp_path)
    assert config is not None, [str(p) for p in problems]
    assert [(r.name, r.rtype) for r in config.zones[0].records] == [
        ("sub." + ORIGIN, "NS"),
        ("sub." + ORIGIN, "DS"),
    ]


@pytest.mark.parametrize("signed", [False, True])
def test_a_ds_without_an_ns_set_at_its_name_is_an_error(tmp_path: Path, signing: str, signed: bool) -> None:
    records = "      - {name: www, type: A, value: 192.0.2.1}\n" + record("www", "DS")
    line = 7 if signed else 6
    assert errors(zone(records, signing if signed else ""), tmp_path) == [
        f"c.yaml:{line}: zones[0].records[1].value: a DS record is only allowed at a delegation point "
        "(a name with a static NS set); 'www.gslb.example.com.' has no NS records"
    ]


def test_a_ds_at_the_apex_is_an_error_pointing_to_the_parent(tmp_path: Path) -> None:
    assert errors(zone(record("@", "DS")), tmp_path) == [
        "c.yaml:5: zones[0].records[0].type: a DS record belongs in the parent zone, not at the apex "
        "(`gslbd delegation` prints it)"
    ]


def test_gslbd_check_exits_1_for_a_static_dnskey_in_a_signed_zone(
    tmp_path: Path, signing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(zone(record("@", "DNSKEY"), signing))
    assert main(["check", "-c", str(path)]) == 1
    out = capsys.readouterr()
    expected = "zones[0].records[0].type: DNSKEY records are made from the zone's dnssec keys"
    assert expected in out.out + out.err
