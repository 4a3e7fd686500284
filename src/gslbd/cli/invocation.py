"""How to run this very gslbd again from a shell: what printed commands (the demo's) should start with.

`gslbd` alone works only when the virtualenv's bin/ is on PATH, which the README never asks for; the
path of the running executable works as printed from any directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys


def self_command(argv0: str | None = None, executable: str | None = None) -> str:
    """The absolute path of the running `gslbd` script, or `<python> -m gslbd` when started that way;
    quoted for a POSIX shell."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    found = argv0 if os.sep in argv0 else shutil.which(argv0) if argv0 else None
    if found and not found.endswith(".py") and os.path.isfile(found):
        return shlex.quote(os.path.abspath(found))
    return f"{shlex.quote(os.path.abspath(executable))} -m gslbd"
