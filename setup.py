"""Build the C parts; everything else is in pyproject.toml.

- `gslbd.wire._cfast`: the answer table in C and the UDP loop that answers from it without the GIL
  (wire/ctable.py, server/udp.py). Required where a C compiler exists: a failed build fails the
  install loudly. Without a compiler gslbd installs without it, answers every query in pure Python
  (slowly) and says so at start (wire/ctable.py `python_only_notice`);
- `gslbd.config._cshape`: the common shape of a service read in C (config/fast.py), for large services
  files (optional);
- `gslbd.config._cyaml`: a configuration read by libyaml straight into values (config/yaml_fast.py),
  for large inline `services:` lists; it needs libyaml's header (Debian: libyaml-dev) (optional).

All are compiled with -Wall -Wextra -Werror. `optional=True`: where they cannot be compiled, gslbd
installs without them (tests/unit/wire/test_ctable.py also fails where a compiler exists but `_cfast`
is missing).
"""

import os
import shutil
import sysconfig

from setuptools import Extension, setup


def compiler_present() -> bool:
    """Whether the C compiler the build would use is here (CC, else the one Python was built with)."""
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shutil.which(compiler.split()[0]) is not None


STRICT = ["-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11"]

setup(
    ext_modules=[
        Extension(
            "gslbd.wire._cfast",
            ["src/gslbd/wire/_cfast.c"],
            depends=[
                "src/gslbd/wire/_guard.c",
                "src/gslbd/wire/_tap.c",
                "src/gslbd/wire/_tcp.c",
                "src/gslbd/wire/_geocache.c",
                "src/gslbd/wire/_geocache_py.c",
                "src/gslbd/wire/_shed.c",
                "src/gslbd/wire/_pools.c",
            ],  # included by _cfast.c: guard stages, dnstap ring, the TCP path, ECS scope and GeoIP cache, shed_load entries
            optional=not compiler_present(),  # required where it can be built
            extra_compile_args=STRICT,
            libraries=["m"],  # log() of the weighted hash
        ),
        Extension(
            "gslbd.config._cshape", ["src/gslbd/config/_cshape.c"], optional=True, extra_compile_args=STRICT
        ),
        Extension(
            "gslbd.config._cyaml",
            ["src/gslbd/config/_cyaml.c"],
            libraries=["yaml"],
            optional=True,
            extra_compile_args=STRICT,
        ),
    ]
)
