"""Build the optional compiled kernels of the fingerprint core (everything else is in pyproject).

When no C compiler is available the package still installs: the core then runs its numpy
implementation of the same kernels, with the same results, only slower. The build then prints a
warning on standard error (``pip install -v`` shows it; ``dedup-store --version`` says which
kernels run). The kernels are compiled afresh on every build, and a build that cannot compile
them removes what an earlier build left in ``build/``, so a package never ships kernels compiled
from another version of their source.
"""

import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, CompileError, ExecError, PlatformError

_FLAGS = [] if sys.platform == "win32" else ["-O3", "-std=c11"]
_FAILURES = (CCompilerError, CompileError, ExecError, PlatformError)
_WARNING = """
WARNING: the compiled fingerprint kernels were not built ({error}).
dedup_store will run its reference kernels instead: the same results, several times slower.
Install a C compiler (gcc or clang) and the Python headers, then install again;
`dedup-store --version` says which kernels run.
"""


class BuildKernels(build_ext):
    """``build_ext`` that always compiles, and says so when an optional extension fails."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.force = True  # never take a leftover of an earlier build for an up-to-date one

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except _FAILURES as error:
            if not getattr(ext, "optional", False):
                raise
            if not self.inplace:
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            sys.stderr.write(_WARNING.format(error=str(error).strip() or type(error).__name__))


setup(
    cmdclass={"build_ext": BuildKernels},
    ext_modules=[
        Extension(
            "dedup_store.core._kernels",
            sources=["dedup_store/core/_kernels.c"],
            extra_compile_args=_FLAGS,
            optional=True,
        )
    ],
)
