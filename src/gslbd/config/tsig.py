"""Reading TSIG keys: as `dig -y` writes them, from BIND key files, and the `peers.tsig` block.

peers:
  tsig:
    name: gslb-exchange.          # the key's name (made absolute)
    algorithm: hmac-sha256        # default hmac-sha256
    secret: "base64..."           # or secret_file: PATH (a BIND key file or one NAME:SECRET line)
"""

from __future__ import annotations

import base64
import binascii
import re

from gslbd.config.fields import MapReader, nonempty_string
from gslbd.config.names import absolute
from gslbd.model.tsig import ALGORITHMS, DEFAULT_ALGORITHM, TsigKey


class TsigKeyError(ValueError):
    """A TSIG key that cannot be used; the text says why."""


_BIND_KEY = re.compile(r'key\s+"?(?P<name>[^"\s{]+)"?\s*\{(?P<body>.*?)\}\s*;', re.DOTALL | re.IGNORECASE)
_BIND_FIELD = re.compile(r'(?P<field>algorithm|secret)\s+"?(?P<value>[^";\s]+)"?\s*;', re.IGNORECASE)


def check_algorithm(algorithm: str) -> str:
    algorithm = algorithm.strip().lower().rstrip(".")
    if algorithm not in ALGORITHMS:
        raise TsigKeyError(f"unknown TSIG algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})")
    return algorithm


def _check_secret(secret: str) -> str:
    try:
        if not base64.b64decode(secret, validate=True):
            raise TsigKeyError("the TSIG secret is empty")
    except (binascii.Error, ValueError) as e:
        raise TsigKeyError(f"the TSIG secret is not base64: {e}") from None
    return secret


def parse_tsig_key(text: str, algorithm: str | None = None) -> TsigKey:
    """A key written as dig -y writes it: `NAME:SECRET` or `ALGORITHM:NAME:SECRET`. `algorithm`
    (--tsig-algorithm) applies to the two-part form; default hmac-sha256."""
    parts = text.strip().split(":")
    if len(parts) == 2:
        name, secret = parts
        alg = algorithm or DEFAULT_ALGORITHM
    elif len(parts) == 3:
        alg, name, secret = parts
        if algorithm is not None and check_algorithm(algorithm) != check_algorithm(alg):
            raise TsigKeyError(f"the key says {alg} but --tsig-algorithm says {algorithm}")
    else:
        raise TsigKeyError("a TSIG key is NAME:SECRET or ALGORITHM:NAME:SECRET (secret in base64)")
    if not name:
        raise TsigKeyError("the TSIG key name is empty")
    return TsigKey(absolute(name), _check_secret(secret), check_algorithm(alg))


def parse_tsig_key_file(text: str, algorithm: str | None = None) -> TsigKey:
    """A key file: BIND's `key "name" { algorithm ...; secret "..."; };` (as tsig-keygen writes it)
    or one line `NAME:SECRET` / `ALGORITHM:NAME:SECRET`."""
    found = _BIND_KEY.search(text)
    if found is None:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if len(lines) != 1:
            raise TsigKeyError("the key file holds neither a BIND key statement nor one NAME:SECRET line")
        return parse_tsig_key(lines[0], algorithm)
    fields = {m["field"].lower(): m["value"] for m in _BIND_FIELD.finditer(found["body"])}
    if "secret" not in fields:
        raise TsigKeyError(f"key {found['name']!r} in the key file has no secret")
    alg = fields.get("algorithm", algorithm or DEFAULT_ALGORITHM)
    if algorithm is not None and check_algorithm(algorithm) != check_algorithm(alg):
        raise TsigKeyError(f"the key file says {alg} but --tsig-algorithm says {algorithm}")
    return TsigKey(absolute(found["name"]), _check_secret(fields["secret"]), check_algorithm(alg))


def read_tsig(r: MapReader | None) -> TsigKey | None:
    """The `tsig` block of `peers`: one key shared by every site of the exchange. With `secret_file`
    the name and algorithm may come from the file; given in both places, they must agree."""
    if r is None:
        return None
    r.check_keys(("name", "algorithm", "secret", "secret_file"))
    name = r.opt("name", nonempty_string)
    algorithm_text = r.opt("algorithm", nonempty_string)
    secret = r.opt("secret", nonempty_string)
    secret_file = r.opt("secret_file", nonempty_string)
    try:
        algorithm = check_algorithm(algorithm_text) if algorithm_text is not None else None
    except TsigKeyError as e:
        r.error("algorithm", str(e))
        return None
    if r.has("secret") == r.has("secret_file"):
        r.error("secret", "give exactly one of secret and secret_file")
        return None
    if secret_file is not None:
        return _from_file(r, secret_file, name, algorithm)
    if name is None:
        r.missing("name")
        return None
    try:
        return TsigKey(absolute(name), _check_secret(secret or ""), algorithm or DEFAULT_ALGORITHM)
    except TsigKeyError as e:
        r.error("secret", str(e))
        return None


def _from_file(r: MapReader, secret_file: str, name: str | None, algorithm: str | None) -> TsigKey | None:
    path = r.rep.resolve_path(secret_file)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        r.error("secret_file", f"cannot read key file {str(path)!r}: {why}")
        return None
    try:
        key = parse_tsig_key_file(text)
    except TsigKeyError as e:
        r.error("secret_file", f"{str(path)!r}: {e}")
        return None
    if name is not None and absolute(name) != key.name:
        r.error("name", f"{absolute(name)!r} but the key file {str(path)!r} holds key {key.name!r}")
        return None
    if algorithm is not None:
        try:  # the file's own algorithm wins only when it states one; it may not contradict this one
            key = parse_tsig_key_file(text, algorithm)
        except TsigKeyError:
            r.error("algorithm", f"{algorithm} but the key file {str(path)!r} says {key.algorithm}")
            return None
    return key
