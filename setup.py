"""Build the optional C parts; everything else is in pyproject.toml.

- `gslbd.server._mmsg`: batched UDP receive/send (recvmmsg/sendmmsg) for the Python UDP loop;
- `gslbd.wire._cfast`: the answer table in C and the UDP loop that answers from it without the GIL
  (wire/ctable.py, server/udp.py);
- `gslbd.config._cshape`: the common shape of a service read in C (config/fast.py), for large services
  files;
- `gslbd.config._cyaml`: a configuration read by libyaml straight into values (config/yaml_fast.py),
  for large inline `services:` lists; it needs libyaml's header (Debian: libyaml-dev).

All are compiled with -Wall -Wextra -Werror. `optional=True`: where they cannot be compiled (no
compiler, no recvmmsg), gslbd installs without them and answers in Python (tests/unit/wire/test_ctable.py
fails where a compiler exists but the build did not succeed).
"""

from setuptools import Extension, setup

STRICT = ["-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11"]

setup(
    ext_modules=[
        Extension("gslbd.server._mmsg", ["src/gslbd/server/_mmsg.c"], optional=True, extra_compile_args=STRICT),
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
            optional=True,
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
