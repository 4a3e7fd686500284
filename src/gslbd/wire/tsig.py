"""TSIG (RFC 8945) with dnspython: the keyring of a key, and what a server answers to a signed query.

gslbd signs the multi-site exchange when `peers.tsig` is set: every poll and NOTIFY is signed by the
asking site and every reply by the answering one. A server verifies a signed query here before it
answers; the answer to a verified query is signed with the same key. A signed query it cannot verify
gets NOTAUTH, unsigned (RFC 8945 5.2: BADKEY for an unknown key or algorithm, BADSIG for a wrong MAC,
BADTIME for a clock off by more than the fudge; dnspython cannot sign an error it could not verify,
so the TSIG error code itself is not sent). Unsigned queries are answered as ever.
"""

from __future__ import annotations

import struct
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


BADSIG = 16
BADKEY = 17
BADTIME = 18
ERROR_NAMES = {BADSIG: "BADSIG", BADKEY: "BADKEY", BADTIME: "BADTIME"}


class TsigRefused(Exception):
    """A signed message that does not verify: `reason` says why (unknown key, bad signature, time),
    `error` is the TSIG error code of RFC 8945 5.2 (BADKEY, BADSIG or BADTIME)."""

    def __init__(self, reason: str, error: int = BADKEY) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error


# dnspython's verification errors, with the TSIG error they are, and what they mean for a query we got
# and for a reply to ours (Peer*: the reply carries the peer's TSIG error about our query).
_REFUSALS: tuple[tuple[type[Exception], int, str, str], ...] = (
    (dns.message.UnknownTSIGKey, BADKEY, "unknown TSIG key", "the reply is signed with another key"),
    (dns.tsig.BadSignature, BADSIG, "bad TSIG signature", "the reply's TSIG signature does not verify"),
    (dns.tsig.BadTime, BADTIME, "TSIG time outside the fudge", "the reply's TSIG time is outside the fudge"),
    (dns.tsig.BadAlgorithm, BADKEY, "unknown TSIG algorithm", "the reply's TSIG algorithm is unknown"),
    (dns.tsig.BadKey, BADKEY, "unknown TSIG key", "the reply is signed with another key"),
    (dns.tsig.PeerBadKey, BADKEY, "TSIG error BADKEY", "the peer does not know our key (BADKEY)"),
    (dns.tsig.PeerBadSignature, BADSIG, "TSIG error BADSIG", "the peer says our signature is bad (BADSIG)"),
    (dns.tsig.PeerBadTime, BADTIME, "TSIG error BADTIME", "the peer says our clock is off (BADTIME)"),
    (dns.tsig.PeerError, BADKEY, "TSIG error", "the peer refused our TSIG signature"),
)


def _parse_verified(data: bytes, ring: Keyring, request_mac: bytes, *, reply: bool) -> dns.message.Message:
    try:
        return dns.message.from_wire(data, keyring=ring, request_mac=request_mac)
    except tuple(error for error, _, _, _ in _REFUSALS) as exc:
        for error, code, as_query, as_reply in _REFUSALS:
            if isinstance(exc, error):
                raise TsigRefused(as_reply if reply else as_query, code) from None
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


def error_reply(response: bytes, query_data: bytes, error: int, key: TsigKey | None, now: int) -> bytes:
    """`response` (an unsigned NOTAUTH to a query whose TSIG did not verify) with the TSIG record of
    RFC 8945 5.2: the query's key name, algorithm, time, fudge and original ID, the `error`; unsigned
    (empty MAC) for BADKEY and BADSIG; for BADTIME signed with `key` over the query's MAC, with the
    query's Time Signed and our time (`now`) as Other Data (5.2.3), so that the client can verify it
    and learn our clock. `response` unchanged when the query's TSIG cannot even be read."""
    try:
        query = dns.message.from_wire(query_data, keyring=False)
    except Exception:  # malformed beyond its signature
        return response
    if query.tsig is None:
        return response
    owner = query.tsig.name
    theirs = query.tsig[0]
    rdata = theirs.replace(mac=b"", error=error, other=b"")
    ours = keyring(key).get(owner) if key is not None else None
    if error == BADTIME and ours is not None:
        other = struct.pack("!HI", (now >> 32) & 0xFFFF, now & 0xFFFFFFFF)
        rdata = rdata.replace(other=other)
        rdata, _ = dns.tsig.sign(  # type: ignore[no-untyped-call]
            response, ours, rdata, theirs.time_signed, theirs.mac
        )
    rdata_wire = rdata.to_wire(canonicalize=True) or b""
    record = (owner.to_wire() or b"") + struct.pack("!HHIH", 250, 255, 0, len(rdata_wire)) + rdata_wire
    arcount = int.from_bytes(response[10:12], "big") + 1
    return response[:10] + arcount.to_bytes(2, "big") + response[12:] + record
