"""`gslbd dnssec keygen`: make a DNSSEC key pair as BIND key files, for `zones[].dnssec.keys`.

    gslbd dnssec keygen --zone ORIGIN [--algorithm ecdsap256sha256|ed25519] [--zsk] --dir DIR

Prints the base name of the files written (`DIR/Kgslb.example.com.+013+12345`, with `.key` and
`.private`), which is what the config lists. Without --zsk the key has the SEP flag (257): a KSK, or a
combined signing key when it is the zone's only key. Exit 0 on success, 2 on bad arguments (an invalid
zone name, --dir something other than a directory) or a file that cannot be written, with
`... keygen: error: ...`. A --dir that does not exist is created (with its parents), mode 0700.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gslbd.config.dnssec import generate_key_pair
from gslbd.config.fields import Invalid
from gslbd.config.names import absolute, check_absolute

ALGORITHM_NAMES = {"ecdsap256sha256": 13, "ed25519": 15}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `dnssec` (with `keygen`) to the gslbd command line; it sets `args.run(args) -> int`."""
    p = sub.add_parser("dnssec", help="DNSSEC key management (keygen)")
    verbs = p.add_subparsers(dest="dnssec_command", metavar="VERB")
    verbs.required = True
    keygen = verbs.add_parser(
        "keygen",
        help="make a key pair as BIND key files",
        description="Write a new key pair for a zone as BIND key files (.key and .private) and print "
        "their base name, to list under zones[].dnssec.keys.",
    )
    keygen.add_argument("--zone", required=True, metavar="ORIGIN", help="the zone the key signs")
    keygen.add_argument(
        "--algorithm",
        default="ecdsap256sha256",
        choices=sorted(ALGORITHM_NAMES),
        type=str.lower,
        help="ecdsap256sha256 (13, default) or ed25519 (15)",
    )
    keygen.add_argument(
        "--zsk", action="store_true", help="a zone-signing key (flags 256) instead of a KSK/CSK (257)"
    )
    keygen.add_argument("--dir", required=True, metavar="DIR", help="where to write the key files")
    keygen.set_defaults(run=run_keygen)


def _fail(message: str) -> int:
    """Say what is wrong the way argparse does for this command (`prog: error: ...`); exit code 2."""
    print(f"gslbd dnssec keygen: error: {message}", file=sys.stderr)
    return 2


def run_keygen(args: argparse.Namespace) -> int:
    if not args.zone.strip():
        return _fail("--zone is empty")
    try:
        origin = check_absolute(absolute(args.zone))
    except Invalid as e:
        return _fail(f"--zone: {e.message}")
    directory = Path(args.dir)
    if not directory.is_dir():
        if directory.exists() or directory.is_symlink():
            return _fail(f"--dir {args.dir!r} is not a directory")
        try:  # a new key directory: only its owner may list it (it will hold private keys)
            directory.mkdir(mode=0o700, parents=True)
        except OSError as e:
            return _fail(f"cannot create --dir {args.dir!r}: {e.strerror or e}")
    try:
        base = generate_key_pair(origin, ALGORITHM_NAMES[args.algorithm], not args.zsk, directory)
    except OSError as e:
        return _fail(f"cannot write {e.filename or args.dir}: {e.strerror or e}")
    print(base)
    return 0
