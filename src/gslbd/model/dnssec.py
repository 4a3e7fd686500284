"""DNSSEC signing settings of a zone: its key pairs and how long signatures live (docs/dnssec.md)."""

from __future__ import annotations

from dataclasses import dataclass

# DNSKEY algorithms gslbd signs with (RFC 8624 recommended for signing): number -> mnemonic.
ALGORITHMS = {13: "ECDSAP256SHA256", 15: "ED25519"}
SEP = 0x0001  # the Secure Entry Point flag: a KSK (or a CSK) has flags 257
ZONE_KEY = 0x0100
REVOKE = 0x0080
DENIAL_SIGNING_RATE = 100  # the default of zones[].dnssec.denial_signing_rate, signatures per second


@dataclass(frozen=True, slots=True, repr=False)
class DnssecKey:
    """One key pair, as read from BIND key files. `private` is the raw private key (the P-256 scalar
    or the Ed25519 seed, 32 bytes); `sign` is False for a key that is only published (pre-published
    or being retired in a rollover). The repr leaves the private key out."""

    path: str
    flags: int
    algorithm: int
    public: str  # the DNSKEY public key field, base64
    private: bytes
    tag: int
    sign: bool = True

    @property
    def sep(self) -> bool:
        return bool(self.flags & SEP)

    @property
    def dnskey_text(self) -> str:
        return f"{self.flags} 3 {self.algorithm} {self.public}"

    def __repr__(self) -> str:
        return f"DnssecKey({self.path!r}, flags={self.flags}, algorithm={self.algorithm}, tag={self.tag})"


@dataclass(frozen=True, slots=True)
class Dnssec:
    """A zone's signing settings. `cds` holds the DS rdata (SHA-256) of every SEP key, published as
    CDS (and its DNSKEY as CDNSKEY) for the parent (RFC 7344)."""

    keys: tuple[DnssecKey, ...]
    signature_validity: int = 7 * 86400
    refresh_before: int = 2 * 86400
    jitter: int = 12 * 3600
    cds: tuple[str, ...] = ()
    # Fresh RFC 9824 compact denials signed per second (per process) before nonexistent names are
    # answered from the pre-signed NSEC chain instead (0: always the chain). docs/dnssec.md "Denial".
    denial_signing_rate: int = DENIAL_SIGNING_RATE

    def signing_keys(self, apex_keyset: bool) -> tuple[DnssecKey, ...]:
        """Keys that sign the DNSKEY, CDS and CDNSKEY RRsets (`apex_keyset`: the active SEP keys) or
        every other RRset (the active non-SEP keys); with no key of that kind, the other kind signs
        (a combined signing key, CSK)."""
        active = [k for k in self.keys if k.sign]
        wanted = [k for k in active if k.sep == apex_keyset]
        return tuple(wanted or active)
