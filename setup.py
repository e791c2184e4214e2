"""Build of the optional C speedup (everything else is in pyproject.toml).

``windowfit._weigh`` computes the profile estimate of :mod:`windowfit.profiles` in one
pass; ``windowfit._bpe`` counts exactly with a rank-file vocabulary
(:mod:`windowfit.vocabulary`). Both are optional: where it cannot be compiled (no C compiler), the build goes on
without it and windowfit counts with the same numbers in Python.
"""

import sys

from setuptools import Extension, setup

_FLAGS = [] if sys.platform == "win32" else ["-O3", "-std=c99"]

setup(
    ext_modules=[
        Extension("windowfit._weigh", ["src/windowfit/_weigh.c"], optional=True, extra_compile_args=_FLAGS),
        Extension("windowfit._bpe", ["src/windowfit/_bpe.c"], optional=True, extra_compile_args=_FLAGS),
    ]
)
