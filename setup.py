"""Build of the optional C speedup (everything else is in pyproject.toml).

``windowfit._weigh`` computes the profile estimate of :mod:`windowfit.profiles` in one
pass. It is optional: where it cannot be compiled (no C compiler), the build goes on
without it and windowfit counts with the same numbers in Python.
"""

import sys

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "windowfit._weigh",
            ["src/windowfit/_weigh.c"],
            optional=True,
            extra_compile_args=[] if sys.platform == "win32" else ["-O3", "-std=c99"],
        )
    ]
)
