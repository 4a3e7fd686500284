"""Where two versions of a text differ, in whole lines, found by comparing bytes (a reload of a large
file that changes a few lines: config/service_file.py, config/yaml_reload.py)."""

from __future__ import annotations


def changed(new: bytes, old: bytes) -> tuple[int, int, int]:
    """Where two files differ, in whole lines: (start, stop in `new`, stop in `old`): both files are
    the same before `start` (a line's start) and from their stops to their ends (each stop a line's
    start, or the end)."""
    first = common_prefix(new, old)
    start = new.rfind(b"\n", 0, first) + 1
    room = min(len(new), len(old)) - start
    same_end = common_suffix(new, old, room)
    # The common end, from the first line start inside it (a byte before it may differ).
    at = new.find(b"\n", len(new) - same_end) if same_end else -1
    if at < 0:
        return start, len(new), len(old)
    cut = len(new) - (at + 1)  # bytes of whole lines at the end, the same in both
    return start, len(new) - cut, len(old) - cut


def common_prefix(a: bytes, b: bytes) -> int:
    """How many first bytes two strings share (compared 64 KiB at a time, then narrowed)."""
    n = min(len(a), len(b))
    step = 1 << 16
    i = 0
    while i < n and a[i : i + step] == b[i : i + step]:
        i += step
    if i >= n:
        return n
    lo, hi = i, min(i + step, n)  # a[:lo] == b[:lo]; they differ before hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo if a[lo] != b[lo] else hi


def common_suffix(a: bytes, b: bytes, most: int) -> int:
    """How many last bytes (at most `most`) two strings share, compared as `common_prefix` does,
    without reversing copies of them."""
    la, lb = len(a), len(b)
    step = 1 << 16
    i = 0  # a[la - i:] == b[lb - i:]
    while i < most:
        size = min(step, most - i)
        if a[la - i - size : la - i] != b[lb - i - size : lb - i]:
            break
        i += size
    else:
        return most
    lo, hi = i, min(i + step, most)  # the suffixes of length lo agree; those of length hi do not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[la - mid : la - lo] == b[lb - mid : lb - lo]:
            lo = mid
        else:
            hi = mid
    return lo
