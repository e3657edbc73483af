"""Build the optional compiled kernels of the fingerprint core (everything else is in pyproject).

When no C compiler is available the package still installs: the core then runs its numpy
implementation of the same kernels, with the same results, only slower.
"""

import sys

from setuptools import Extension, setup

_FLAGS = [] if sys.platform == "win32" else ["-O3", "-std=c11"]

setup(
    ext_modules=[
        Extension(
            "dedup_store.core._kernels",
            sources=["dedup_store/core/_kernels.c"],
            extra_compile_args=_FLAGS,
            optional=True,
        )
    ]
)
