"""A TSIG key (RFC 8945): the shared secret that signs DNS messages between servers."""

from __future__ import annotations

from dataclasses import dataclass

ALGORITHMS = ("hmac-sha256", "hmac-sha512", "hmac-sha384", "hmac-sha224", "hmac-sha1", "hmac-md5")
DEFAULT_ALGORITHM = "hmac-sha256"


@dataclass(frozen=True, slots=True, repr=False)
class TsigKey:
    """A key's absolute name, its base64 secret and its HMAC algorithm (one of ALGORITHMS). The repr
    leaves the secret out, so a key never reaches a log line."""

    name: str
    secret: str
    algorithm: str = DEFAULT_ALGORITHM

    def __repr__(self) -> str:
        return f"TsigKey({self.name!r}, algorithm={self.algorithm!r})"
