"""`endpoints[].tags`: short labels an admin selector picks endpoints by (`PUT /api/v1/admin` with
{"selector": {"tags": ["canary"]}}). One reading of a tag for the located validator (config/services.py)
and the fast path (config/fast.py).

A tag is 1 to 63 characters: letters, digits and `_ . : -`, starting with a letter or digit; tags are
compared exactly (case matters). A tag given twice counts once.
"""

from __future__ import annotations

import re

from gslbd.config.fields import Invalid, describe_value

MAX_TAG = 63
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*\Z")
_HELP = "a tag is 1 to 63 letters, digits, '_', '.', ':' or '-', starting with a letter or digit"


def tag_value(value: object) -> str:
    """The tag a plain value gives; Invalid says why not."""
    if not isinstance(value, str):
        raise Invalid(f"expected a tag (a string), got {describe_value(value)}")
    if not value or len(value) > MAX_TAG or not _TAG.match(value):
        raise Invalid(f"invalid tag {value!r}: {_HELP}")
    return value


def tags_value(value: object) -> tuple[str, ...]:
    """The tags a plain list gives (each once, in order); Invalid says why not."""
    if not isinstance(value, list):
        raise Invalid(f"expected a list of tags, got {describe_value(value)}")
    return tuple(dict.fromkeys(tag_value(item) for item in value))
