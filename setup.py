"""Build the one optional C helper (batched UDP receive/send); everything else is in pyproject.toml.

`optional=True`: where it cannot be compiled (no compiler, no recvmmsg), gslbd installs without it and
the UDP listener uses one recvfrom/sendto per datagram instead.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("gslbd.server._mmsg", ["src/gslbd/server/_mmsg.c"], optional=True),
    ]
)
