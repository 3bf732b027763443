"""Build hook: compiles the sizing engine's hot modules with mypyc when the wheel is built.

The metadata lives in pyproject.toml; this file only adds the compiled modules. The same
type-checked sources are compiled to C extensions (mypyc, part of mypy), which answer every
sizing and serving question ~1.6x faster (README "Benchmarks": `bench/size_sweep.py`) with
the same figures (`bench/size_equivalence.py`, run by .ci/run against the pure modules).

The pure-Python modules are always installed too, and are what runs when:
- the install is editable (`pip install -e .`): the sources you edit are the ones that run;
- `GPU_TRACKER_PURE_PYTHON=1` is set at build time;
- mypyc is not importable, or the C compiler fails (a warning, then the pure modules).
"""

from __future__ import annotations

import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

# The engine's modules a sizing query runs through. Left out: sizing/__init__ (lazy imports),
# architecture (mypyc cannot compile its dataclass's signature), request (replaces its
# dataclass's __init__, which a compiled function cannot be), models and hf_config (file
# reading, no gain).
COMPILED = [
    f"tracker/sizing/{name}.py"
    for name in ("engine", "fixed", "memory", "parts", "plan", "prepare", "replica", "search",
                 "serving", "serving_spec", "serving_step", "throughput", "timing")
]
# mypy's settings for the compile: not pyproject's [tool.mypy] (its pydantic plugin is not in
# the build environment); imports outside the compiled set are followed silently and a
# library without its package installed is Any (the compiled code does not depend on them).
MYPY_FLAGS = ["--config-file", os.devnull, "--follow-imports", "silent",
              "--ignore-missing-imports"]


class OptionalBuildExt(build_ext):
    """Builds the compiled modules, or none of them: on a compiler error it removes what it
    built and the install goes on with the pure-Python modules."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # CompileError, LinkError, a missing compiler
            for ext in self.extensions:
                path = self.get_ext_fullpath(ext.name)
                if os.path.exists(path):
                    os.remove(path)
            print(f"warning: gpu-tracker: compiling the sizing modules failed ({exc}); "
                  "installing the pure-Python modules", file=sys.stderr)


def compiled_modules() -> list:
    if os.environ.get("GPU_TRACKER_PURE_PYTHON") or "editable_wheel" in sys.argv:
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("warning: gpu-tracker: mypyc is not available; installing the pure-Python "
              "modules", file=sys.stderr)
        return []
    try:
        return mypycify([*MYPY_FLAGS, *COMPILED], group_name="tracker.sizing._compiled",
                        opt_level="3")
    except Exception as exc:  # a type error mypyc refuses to compile
        print(f"warning: gpu-tracker: mypyc could not compile the sizing modules ({exc}); "
              "installing the pure-Python modules", file=sys.stderr)
        return []


setup(ext_modules=compiled_modules(), cmdclass={"build_ext": OptionalBuildExt})
