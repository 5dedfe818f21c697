"""Build the Cython kernels of slr.

Every ``*.pyx`` file under ``slr/`` and ``baselines/`` becomes an extension module.
The kernels are compiled with optimisation and, where the compiler supports it,
OpenMP (``prange`` over examples); without OpenMP they still build and run serially.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent.resolve()
COMPILE_ARGS = ["-O3", "-fno-math-errno"]


def _compiler_supports_openmp() -> bool:
    """Try to compile and link a tiny OpenMP program with the default C compiler."""
    if os.environ.get("SLR_DISABLE_OPENMP"):
        return False
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        return False
    src = "#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        c_file = Path(tmp) / "probe.c"
        c_file.write_text(src)
        result = subprocess.run(
            [cc, "-fopenmp", str(c_file), "-o", str(Path(tmp) / "probe")],
            capture_output=True,
        )
    return result.returncode == 0


def _extensions() -> list:
    openmp = _compiler_supports_openmp()
    if not openmp:
        print("slr: building without OpenMP (kernels will run on one thread)", file=sys.stderr)
    flags = ["-fopenmp"] if openmp else []
    extensions = []
    for pyx in sorted(list(HERE.glob("slr/**/*.pyx")) + list(HERE.glob("baselines/**/*.pyx"))):
        rel = pyx.relative_to(HERE)
        module = ".".join(rel.with_suffix("").parts)
        extensions.append(
            Extension(
                module,
                [str(rel)],
                include_dirs=[np.get_include()],
                extra_compile_args=COMPILE_ARGS + flags,
                extra_link_args=flags,
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            )
        )
    return cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "nonecheck": False,
        },
    )


setup(ext_modules=_extensions())
