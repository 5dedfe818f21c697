"""Build the Cython kernels of slr.

The kernels are listed in ``KERNELS`` and the Cython declarations they share (``.pxd``
files, cimported by absolute name, e.g. ``from slr._kernel_utils cimport logsumexp``) in
``DECLARATIONS``. The build stops with an error when one of these sources is missing (a
package built without a kernel installs but fails at import, and one without a shared
``.pxd`` does not compile) and when a ``.pyx`` or ``.pxd`` file under ``slr/`` or
``baselines/`` is not listed. They are the extensions' sources: setuptools' ``build_ext``
runs Cython on them at build time (Cython is a build requirement in ``pyproject.toml``),
so a source distribution ships them and no generated C.

The kernels are compiled with optimisation and, where the compiler supports it,
OpenMP (``prange`` over examples); without OpenMP they still build and run serially. Cython's
own utility code, which every kernel would otherwise carry, is compiled once into
``slr._cyutility`` (``SHARED_UTILITY``), which the kernels import.

After compiling, ``build_ext`` writes ``slr/_build_record.json`` beside the kernels: what they
were built from (the digest of the kernel sources, the flags, the Cython directives, the
versions of Cython and NumPy, the compiler) and the SHA-256 of each extension module. The
suite's cache key includes the former and checks the latter against the modules it loads
(``slr_suite/provenance.py``), so kernels edited and not rebuilt are refused.
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent.resolve()

#: Every extension module, by its source (the module name is the path with dots).
KERNELS = (
    "slr/inference/_star.pyx",
    "slr/inference/_sum_product.pyx",
    "slr/inference/_viterbi.pyx",
    "slr/oracles/_boosting/growth.pyx",
    "slr/oracles/_boosting/histogram.pyx",
    "slr/oracles/_boosting/logistic.pyx",
    "slr/oracles/_boosting/predictor.pyx",
    "slr/oracles/_boosting/splitting.pyx",
)
#: Declarations (``.pxd``) and C headers the kernels include; each kernel is rebuilt when one
#: changes.
DECLARATIONS = (
    "slr/_kernel_utils.pxd",
    "slr/inference/_star_simd.h",
    "slr/oracles/_boosting/common.pxd",
    "slr/oracles/_boosting/histogram.pxd",
    "slr/oracles/_boosting/splitting.pxd",
)
#: Cython's utility code (memoryviews, exceptions, module set-up), generated once as this module
#: and imported by every kernel (Cython >= 3.1) instead of carried in each kernel's C: the C that
#: gcc compiles falls from 10.1 to 5.0 MB, one core's compile from 32 to 15 s.
SHARED_UTILITY = "slr._cyutility"
#: One top-level package is installed, ``slr``: the checkout keeps the baselines and the comparison
#: suite at its top (``baselines/``, ``slr_suite/``), the installed tree holds them as
#: ``slr.baselines`` and ``slr.suite``, so that installing slr adds no other top-level names.
PACKAGE_DIRS = {"slr": "slr", "slr.baselines": "baselines", "slr.suite": "slr_suite"}
SOURCE_ROOTS = ("slr", "baselines")
COMPILE_ARGS = ["-O3", "-fno-math-errno", "-g0"]
CYTHON_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
    "nonecheck": False,
}


def _check_sources() -> None:
    """Exit with a message unless the Cython sources are exactly those listed here."""
    missing = [path for path in KERNELS + DECLARATIONS if not (HERE / path).is_file()]
    if missing:
        sys.exit(
            f"error: slr: kernel sources missing: {', '.join(missing)} (in {HERE}). "
            "Without them the package would fail to build or to import; a source "
            "distribution must contain them."
        )
    listings = ((KERNELS, "KERNELS", "pyx"), (DECLARATIONS, "DECLARATIONS", "pxd"))
    for listing, name, suffix in listings:
        found = {
            path.relative_to(HERE).as_posix()
            for root in SOURCE_ROOTS
            for path in (HERE / root).glob(f"**/*.{suffix}")
        }
        unlisted = sorted(found - set(listing))
        if unlisted:
            sys.exit(f"error: slr: add {', '.join(unlisted)} to {name} in setup.py")
    try:
        from Cython import __version__ as cython_version
    except ImportError:
        cython_version = None
    release = re.match(r"(\d+)\.(\d+)", cython_version or "")
    if release is None or tuple(map(int, release.groups())) < (3, 1):
        sys.exit(
            f"error: slr: building the kernels needs Cython >= 3.1 (found {cython_version or 'none'}; "
            "pip installs it from pyproject.toml's build requirements; with --no-build-isolation "
            "install it first)"
        )


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


def _extensions() -> list[Extension]:
    _check_sources()
    openmp = _compiler_supports_openmp()
    if not openmp:
        print("slr: building without OpenMP (kernels will run on one thread)", file=sys.stderr)
    flags = ["-fopenmp"] if openmp else []
    extensions = []
    for source in KERNELS:
        extension = Extension(
            source.removesuffix(".pyx").replace("/", "."),
            [source],
            depends=list(DECLARATIONS),
            include_dirs=[np.get_include()],
            extra_compile_args=COMPILE_ARGS + flags,
            extra_link_args=flags,
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        )
        extension.cython_directives = CYTHON_DIRECTIVES  # read by Cython's build_ext
        extensions.append(extension)
    # no sources listed: cythonize writes its C beside the kernels' C, and no sdist ships it
    extensions.append(Extension(SHARED_UTILITY, [], extra_compile_args=COMPILE_ARGS))
    return extensions


def _provenance():
    """``slr_suite/provenance.py`` (standard library only), for the digests the suite checks."""
    spec = importlib.util.spec_from_file_location("_slr_provenance", HERE / "slr_suite" / "provenance.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)   # dataclasses look it up
    spec.loader.exec_module(module)
    return module


def _compiler_version(command: str) -> str:
    try:
        out = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.splitlines()[0] if out else "unknown"


class RecordedBuildExt(build_ext):
    """``build_ext`` that writes the build record (see the module docstring) after compiling, and
    translates and compiles the kernels in parallel on every core unless told otherwise (``-j N``)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1   # the kernels compile independently of each other

    def run(self) -> None:
        from Cython.Build import cythonize

        # Cython's translation is Python code: in build_ext's threads it would run on one core
        # at a time, so it runs first, in processes, and the extensions are built from its C
        translated = cythonize(self.extensions, nthreads=self.parallel, force=self.force, quiet=True,
                               compiler_directives=CYTHON_DIRECTIVES, shared_utility_qualified_name=SHARED_UTILITY)
        for extension, c_extension in zip(self.extensions, translated, strict=True):
            extension.sources = c_extension.sources
        super().run()
        import Cython

        provenance = _provenance()
        compiler = list(getattr(self.compiler, "compiler_so", None) or ["unknown"])
        inputs = {
            "sources": provenance.kernel_sources_digest({root: HERE / root for root in SOURCE_ROOTS}),
            "extensions": {ext.name: dict(compile=ext.extra_compile_args, link=ext.extra_link_args,
                                          macros=ext.define_macros) for ext in self.extensions},
            "directives": CYTHON_DIRECTIVES,
            "cython": Cython.__version__,
            "numpy": np.__version__,
            "compiler": compiler,
            "compiler_version": _compiler_version(compiler[0]),
        }
        binaries = {ext.name: provenance.file_sha256(Path(self.get_ext_fullpath(ext.name)))
                    for ext in self.extensions}
        record = Path(self.get_ext_fullpath("slr.record")).parent / provenance.BUILD_RECORD
        record.write_text(json.dumps({"inputs": inputs, "binaries": binaries}, indent=1, sort_keys=True) + "\n")


def _packages() -> list[str]:
    """Every package of :data:`PACKAGE_DIRS` and its subpackages, by installed name."""
    return [name for package, directory in PACKAGE_DIRS.items()
            for name in (package, *(f"{package}.{sub}" for sub in find_packages(directory)))]


setup(packages=_packages(), package_dir=PACKAGE_DIRS, ext_modules=_extensions(),
      cmdclass={"build_ext": RecordedBuildExt})
