"""Start a helper daemon (nsd, unbound, ...) with its output in a log file, and always stop it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


def stop(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL if it is still there after `grace` seconds."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(grace)


@contextmanager
def daemon(argv: Sequence[str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run `argv` with stdout and stderr in `log_path`; stopped when the block ends, however it ends."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        stop(proc)
