"""TSIG (RFC 8945) with dnspython: the keyring of a key, and what a server answers to a signed query.

gslbd signs the multi-site exchange when `peers.tsig` is set: every poll and NOTIFY is signed by the
asking site and every reply by the answering one. A server verifies a signed query here before it
answers; the answer to a verified query is signed with the same key. A signed query it cannot verify
gets NOTAUTH, unsigned (RFC 8945 5.2: BADKEY for an unknown key or algorithm, BADSIG for a wrong MAC,
BADTIME for a clock off by more than the fudge; dnspython cannot sign an error it could not verify,
so the TSIG error code itself is not sent). Unsigned queries are answered as ever.
"""

from __future__ import annotations

from functools import lru_cache

import dns.exception
import dns.message
import dns.name
import dns.tsig

from gslbd.model.tsig import TsigKey

Keyring = dict[dns.name.Name, dns.tsig.Key]


@lru_cache(maxsize=16)
def keyring(key: TsigKey) -> Keyring:
    """The dnspython keyring holding `key` alone (cached: keys are frozen values)."""
    name = dns.name.from_text(key.name)
    return {name: dns.tsig.Key(name, key.secret, key.algorithm)}


class TsigRefused(Exception):
    """A signed message that does not verify: `reason` says why (unknown key, bad signature, time)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# dnspython's verification errors, with what they mean for a query we got and for a reply to ours.
_REFUSALS: tuple[tuple[type[Exception], str, str], ...] = (
    (dns.message.UnknownTSIGKey, "unknown TSIG key", "the reply is signed with another key"),
    (dns.tsig.BadSignature, "bad TSIG signature", "the reply's TSIG signature does not verify"),
    (dns.tsig.BadTime, "TSIG time outside the fudge", "the reply's TSIG time is outside the fudge"),
    (dns.tsig.BadAlgorithm, "unknown TSIG algorithm", "the reply's TSIG algorithm is unknown"),
)


def _parse_verified(data: bytes, ring: Keyring, request_mac: bytes, *, reply: bool) -> dns.message.Message:
    try:
        return dns.message.from_wire(data, keyring=ring, request_mac=request_mac)
    except tuple(error for error, _, _ in _REFUSALS) as exc:
        for error, as_query, as_reply in _REFUSALS:
            if isinstance(exc, error):
                raise TsigRefused(as_reply if reply else as_query) from None
        raise
    except dns.exception.FormError as exc:
        if reply and "TSIG" in str(exc):  # "response requires a TSIG but does not have one"
            raise TsigRefused("the reply is not signed") from None
        raise


def read_signed(data: bytes, key: TsigKey | None) -> dns.message.Message:
    """Parse a query, verifying its TSIG when it has one: with `key` None (no TSIG configured) any
    signature is from an unknown key. Raises TsigRefused for a signature that does not verify, and
    dnspython's errors for a malformed message."""
    return _parse_verified(data, keyring(key) if key is not None else {}, b"", reply=False)


def sign_reply(reply: dns.message.Message, query: dns.message.Message, key: TsigKey | None) -> None:
    """Sign `reply` like the verified `query` it answers (nothing to do when the query was unsigned)."""
    if key is None or not query.had_tsig:
        return
    reply.use_tsig(keyring(key), keyname=key.name, algorithm=key.algorithm)
    reply.request_mac = query.mac or b""


def signed_query(wire: bytes, key: TsigKey) -> tuple[bytes, bytes]:
    """A query (its wire form, unsigned) signed with `key`: (signed wire, its MAC for the reply)."""
    message = dns.message.from_wire(wire)
    message.use_tsig(keyring(key), keyname=key.name, algorithm=key.algorithm)
    return message.to_wire(), message.mac or b""


def verify_reply(data: bytes, key: TsigKey, request_mac: bytes) -> dns.message.Message:
    """Parse a reply to a query signed with `key` (MAC `request_mac`); it must be signed and verify.
    Raises TsigRefused otherwise."""
    return _parse_verified(data, keyring(key), request_mac, reply=True)
