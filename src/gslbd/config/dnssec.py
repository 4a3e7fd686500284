"""`zones[].dnssec`: BIND key files (as dnssec-keygen or `gslbd dnssec keygen` write them) and timings.

zones:
  - origin: gslb.example.com.
    dnssec:
      keys:                                  # a combined signing key, or a KSK (257) and a ZSK (256)
        - keys/Kgslb.example.com.+013+12345  # the .key/.private pair (either file's name works)
        - {file: keys/Kgslb.example.com.+013+23456, sign: false}   # published only (rollover)
      signature_validity: 7d
      refresh_before: 2d
      jitter: 12h
      denial_signing_rate: 100               # fresh compact denials per second, then the NSEC chain
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from pathlib import Path

import dns.dnssec
import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.DNSKEY
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from gslbd.config.fields import Invalid, MapReader, as_map, boolean, duration, integer, nonempty_string
from gslbd.config.loader import Scalar
from gslbd.model.dnssec import ALGORITHMS, DENIAL_SIGNING_RATE, REVOKE, SEP, ZONE_KEY, Dnssec, DnssecKey

DNSKEY_FLAGS = (ZONE_KEY, ZONE_KEY | SEP)
_KEY_SUFFIXES = (".key", ".private")
_DNSKEY_LINE = re.compile(r"^(?P<owner>\S+)\s+(?:\d+\s+)?(?:IN\s+)?(?:\d+\s+)?DNSKEY\s+(?P<rdata>.+)$", re.I)


class DnssecKeyError(ValueError):
    """A key pair that cannot be used; the text says why."""


def key_base(path: Path) -> Path:
    """The common part of a key pair's file names (`Kname.+013+12345`), from either file's name."""
    for suffix in _KEY_SUFFIXES:
        if path.name.endswith(suffix):
            return path.with_name(path.name[: -len(suffix)])
    return path


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise DnssecKeyError(f"cannot read {str(path)!r}: {why}") from None


def _public_of(algorithm: int, private: bytes) -> bytes:
    """The DNSKEY public key field of a raw private key."""
    if algorithm == 13:
        key = ec.derive_private_key(int.from_bytes(private, "big"), ec.SECP256R1())
        point = key.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
        return point[1:]  # RFC 6605: x | y without the 0x04 prefix
    return (
        ed25519.Ed25519PrivateKey.from_private_bytes(private)
        .public_key()
        .public_bytes(Encoding.Raw, PublicFormat.Raw)
    )


def read_key_pair(path: Path, origin: str, sign: bool = True) -> DnssecKey:
    """The key pair at `path` (either file of a BIND pair, or their common base name) for zone `origin`."""
    base = key_base(path)
    public_file, private_file = base.with_name(base.name + ".key"), base.with_name(base.name + ".private")
    lines = [ln.strip() for ln in _read(public_file).splitlines()]
    records = [m for ln in lines if ln and not ln.startswith(";") and (m := _DNSKEY_LINE.match(ln))]
    if len(records) != 1:
        raise DnssecKeyError(f"{str(public_file)!r} does not hold exactly one DNSKEY record")
    owner = records[0]["owner"].lower()
    if not owner.endswith("."):
        owner += "."
    if owner != origin:
        raise DnssecKeyError(f"{str(public_file)!r} is a key of {owner!r}, not of the zone {origin!r}")
    try:
        dnskey = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.DNSKEY, records[0]["rdata"])
    except (dns.exception.DNSException, ValueError) as exc:
        raise DnssecKeyError(f"{str(public_file)!r}: invalid DNSKEY: {exc}") from None
    assert isinstance(dnskey, dns.rdtypes.ANY.DNSKEY.DNSKEY)
    algorithm = int(dnskey.algorithm)
    if algorithm not in ALGORITHMS:
        known = ", ".join(f"{n} ({m})" for n, m in ALGORITHMS.items())
        raise DnssecKeyError(f"{str(public_file)!r}: algorithm {algorithm} is not supported (use {known})")
    if dnskey.flags & REVOKE or dnskey.flags not in DNSKEY_FLAGS:
        raise DnssecKeyError(f"{str(public_file)!r}: flags {dnskey.flags}: a zone key has flags 256 or 257")
    fields: dict[str, str] = {}
    for ln in _read(private_file).splitlines():
        name, sep, value = ln.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    stated = fields.get("algorithm", "").split(" ")[0]
    if stated != str(algorithm):
        raise DnssecKeyError(
            f"{str(private_file)!r} says algorithm {stated or '(none)'}, the DNSKEY says {algorithm}"
        )
    try:
        private = base64.b64decode(fields.get("privatekey", ""), validate=True)
    except (binascii.Error, ValueError):
        raise DnssecKeyError(f"{str(private_file)!r}: PrivateKey is not base64") from None
    if algorithm == 13 and 0 < len(private) < 32:
        # an ECDSA key is an integer: BIND writes it without its leading zero bytes (about one key in
        # 256 has a 31-byte PrivateKey), the DNSKEY's arithmetic is the same
        private = private.rjust(32, b"\0")
    if len(private) != 32:
        raise DnssecKeyError(f"{str(private_file)!r}: PrivateKey must be 32 bytes, got {len(private)}")
    try:
        public = _public_of(algorithm, private)
    except ValueError as exc:
        raise DnssecKeyError(f"{str(private_file)!r}: invalid private key: {exc}") from None
    if public != dnskey.key:
        raise DnssecKeyError(
            f"{str(private_file)!r} does not belong to the public key in {str(public_file)!r}"
        )
    return DnssecKey(
        path=str(base),
        flags=int(dnskey.flags),
        algorithm=algorithm,
        public=base64.b64encode(public).decode(),
        private=private,
        tag=dns.dnssec.key_id(dnskey),
        sign=sign,
    )


def ds_text(origin: str, key: DnssecKey, digest: str = "SHA256") -> str:
    """The DS rdata (presentation form) of a key."""
    dnskey = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.DNSKEY, key.dnskey_text)
    assert isinstance(dnskey, dns.rdtypes.ANY.DNSKEY.DNSKEY)
    return dns.dnssec.make_ds(dns.name.from_text(origin), dnskey, digest).to_text()


def generate_key_pair(origin: str, algorithm: int, ksk: bool, directory: Path) -> Path:
    """Make a key pair and write it as BIND key files in `directory`; returns their base path."""
    if algorithm == 13:
        scalar = ec.generate_private_key(ec.SECP256R1()).private_numbers().private_value
        private = scalar.to_bytes(32, "big")
    else:
        private = ed25519.Ed25519PrivateKey.generate().private_bytes_raw()
    public = base64.b64encode(_public_of(algorithm, private)).decode()
    flags = ZONE_KEY | SEP if ksk else ZONE_KEY
    dnskey = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.DNSKEY, f"{flags} 3 {algorithm} {public}")
    assert isinstance(dnskey, dns.rdtypes.ANY.DNSKEY.DNSKEY)
    tag = dns.dnssec.key_id(dnskey)
    base = directory / f"K{origin}+{algorithm:03d}+{tag:05d}"
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
    kind = "key-signing" if ksk else "zone-signing"
    base.with_name(base.name + ".key").write_text(
        f"; This is a {kind} key, keyid {tag}, for {origin}\n; Created: {stamp}\n"
        f"{origin} IN DNSKEY {flags} 3 {algorithm} {public}\n",
        encoding="utf-8",
    )
    private_file = base.with_name(base.name + ".private")
    private_file.touch(mode=0o600)
    private_file.write_text(
        f"Private-key-format: v1.3\nAlgorithm: {algorithm} ({ALGORITHMS[algorithm]})\n"
        f"PrivateKey: {base64.b64encode(private).decode()}\nCreated: {stamp}\n",
        encoding="utf-8",
    )
    return base


def read_dnssec(r: MapReader, origin: str) -> Dnssec | None:
    """The zone's `dnssec` block; every problem is reported at its key (None when unusable)."""
    r.check_keys(("keys", "signature_validity", "refresh_before", "jitter", "denial_signing_rate"))
    validity = round(r.get("signature_validity", duration(), 7 * 86400.0))
    refresh = round(r.get("refresh_before", duration(), 2 * 86400.0))
    jitter = round(r.get("jitter", duration(positive=False), 12 * 3600.0))
    denial_rate = r.get("denial_signing_rate", integer(0, 1_000_000), DENIAL_SIGNING_RATE)
    if refresh + jitter >= validity:
        r.error(
            "refresh_before",
            f"refresh_before ({refresh}s) plus jitter ({jitter}s) must be shorter than "
            f"signature_validity ({validity}s)",
        )
    keys: list[DnssecKey] = []
    seen: dict[int, str] = {}
    for item, path in r.items("keys"):
        sign = True
        where = path
        if isinstance(item, Scalar):
            try:
                text = nonempty_string(item)
            except Invalid as exc:
                r.rep.error(item.line, path, exc.message)
                continue
            line = item.line
        else:
            m = as_map(r.rep, item, path)
            if m is None:
                continue
            m.check_keys(("file", "sign"))
            found = m.req("file", nonempty_string)
            sign = m.get("sign", boolean, True)
            if found is None:
                continue
            text, line, where = found, m.line_of("file"), m.at("file")
        try:
            key = read_key_pair(r.rep.resolve_path(text), origin, sign)
        except DnssecKeyError as exc:
            r.rep.error(line, where, str(exc))
            continue
        if key.tag in seen:
            r.rep.error(line, where, f"key tag {key.tag} is already used by {seen[key.tag]}")
            continue
        seen[key.tag] = where
        keys.append(key)
    if not r.has("keys"):
        r.missing("keys")
        return None
    if not keys:
        return None
    if not any(k.sign for k in keys):
        r.error("keys", "no key signs: at least one key needs sign: true")
        return None
    algorithms = {k.algorithm for k in keys if k.sign}
    if len(algorithms) > 1:
        r.error("keys", "keys that sign must share one algorithm (an algorithm rollover is not supported)")
        return None
    cds = tuple(ds_text(origin, k) for k in keys if k.sep)
    return Dnssec(tuple(keys), validity, refresh, jitter, cds, denial_rate)
