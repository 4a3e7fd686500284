"""zones[].dnssec: key files are read and checked, and every problem is reported at its key and line."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from gslbd.config import check_config_text
from gslbd.config.dnssec import generate_key_pair, read_key_pair

ORIGIN = "gslb.example.com."


def zone(dnssec: str) -> str:
    return f"zones:\n  - origin: {ORIGIN}\n    nameservers: [{{name: ns1, address: 127.0.0.2}}]\n{dnssec}"


def errors(text: str, base: Path) -> list[str]:
    config, problems = check_config_text(text, "c.yaml", base)
    found = [str(p) for p in problems if p.severity == "error"]
    assert (config is None) == bool(found)
    return found


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return generate_key_pair(ORIGIN, 13, True, tmp_path), generate_key_pair(ORIGIN, 13, False, tmp_path)


def test_a_ksk_and_a_zsk_are_read_with_their_roles_and_the_default_timings(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    ksk, zsk = keys
    text = zone(f"    dnssec:\n      keys: [{ksk.name}.key, {{file: {zsk.name}.private}}]\n")
    config, problems = check_config_text(text, "c.yaml", tmp_path)
    assert config is not None, problems
    d = config.zones[0].dnssec
    assert d is not None
    assert [(k.flags, k.algorithm, k.sign) for k in d.keys] == [(257, 13, True), (256, 13, True)]
    assert (d.signature_validity, d.refresh_before, d.jitter) == (7 * 86400, 2 * 86400, 12 * 3600)
    assert d.denial_signing_rate == 100
    assert [k.flags for k in d.signing_keys(True)] == [257]
    assert [k.flags for k in d.signing_keys(False)] == [256]
    assert len(d.cds) == 1 and d.cds[0].split()[1:3] == ["13", "2"]


def test_a_missing_key_file_is_an_error_at_its_line(tmp_path: Path) -> None:
    text = zone("    dnssec:\n      keys:\n        - Knothing.+013+00001\n")
    [error] = errors(text, tmp_path)
    assert error.startswith("c.yaml:6: zones[0].dnssec.keys[0]: cannot read ")


def test_a_private_key_of_another_pair_is_rejected(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    ksk, _ = keys
    other = generate_key_pair(ORIGIN, 13, True, tmp_path / "..")
    (tmp_path / f"{ksk.name}.private").write_text(Path(f"{other}.private").read_text())
    [error] = errors(zone(f"    dnssec: {{keys: [{ksk.name}]}}\n"), tmp_path)
    assert "c.yaml:4: zones[0].dnssec.keys[0]: " in error and "does not belong to the public key" in error


def test_an_unsupported_algorithm_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "Krsa.key").write_text(f"{ORIGIN} IN DNSKEY 257 3 8 AwEAAb4N\n")
    (tmp_path / "Krsa.private").write_text("Private-key-format: v1.3\nAlgorithm: 8 (RSASHA256)\n")
    [error] = errors(zone("    dnssec: {keys: [Krsa]}\n"), tmp_path)
    assert "algorithm 8 is not supported" in error and error.startswith("c.yaml:4: zones[0].dnssec.keys[0]")


def test_a_key_of_another_zone_is_rejected(tmp_path: Path) -> None:
    other = generate_key_pair("other.example.", 13, True, tmp_path)
    [error] = errors(zone(f"    dnssec: {{keys: [{other.name}]}}\n"), tmp_path)
    assert "is a key of 'other.example.', not of the zone 'gslb.example.com.'" in error


def test_the_denial_signing_rate_is_read_and_checked(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    ksk, _ = keys
    config, problems = check_config_text(
        zone(f"    dnssec:\n      keys: [{ksk.name}]\n      denial_signing_rate: 0\n"), "c.yaml", tmp_path
    )
    assert config is not None and config.zones[0].dnssec is not None, problems
    assert config.zones[0].dnssec.denial_signing_rate == 0
    [error] = errors(
        zone(f"    dnssec:\n      keys: [{ksk.name}]\n      denial_signing_rate: -5\n"), tmp_path
    )
    assert error.startswith("c.yaml:6: zones[0].dnssec.denial_signing_rate: "), error


def test_timings_that_leave_no_time_to_refresh_are_rejected(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    ksk, _ = keys
    text = zone(
        f"    dnssec:\n      keys: [{ksk.name}]\n      signature_validity: 1d\n      refresh_before: 1d\n"
    )
    [error] = errors(text, tmp_path)
    assert error.startswith("c.yaml:7: zones[0].dnssec.refresh_before: refresh_before (86400s) plus jitter")


def test_a_zone_with_only_published_keys_is_rejected(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    ksk, _ = keys
    [error] = errors(zone(f"    dnssec:\n      keys: [{{file: {ksk.name}, sign: false}}]\n"), tmp_path)
    assert "c.yaml:5: zones[0].dnssec.keys: no key signs" in error


def test_an_ecdsa_private_key_written_without_its_leading_zero_byte_is_read(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    # BIND writes an ECDSA key as its integer, without leading zeros: one key in 256 has 31 bytes
    ksk, _ = keys
    scalar = 0x00C0FFEE << 216  # a 31-byte integer: 32 bytes with a leading zero byte
    public = ec.derive_private_key(scalar, ec.SECP256R1()).public_key().public_numbers()
    raw = public.x.to_bytes(32, "big") + public.y.to_bytes(32, "big")
    key_file = Path(f"{ksk}.key")
    head, _, _ = key_file.read_text().rpartition(" ")
    key_file.write_text(f"{head} {base64.b64encode(raw).decode()}\n")
    short = base64.b64encode(scalar.to_bytes(31, "big")).decode()
    private_file = Path(f"{ksk}.private")
    private_file.write_text(
        "\n".join(
            f"PrivateKey: {short}" if ln.startswith("PrivateKey:") else ln
            for ln in private_file.read_text().splitlines()
        )
        + "\n"
    )
    key = read_key_pair(ksk, ORIGIN)
    assert key.private == scalar.to_bytes(32, "big")
    assert base64.b64decode(key.public) == raw
