"""Build the pystruct 0.3.2 peer environment (a CPython 3.6 virtualenv).

pystruct 0.3.2 (the last release) only builds and runs on an old stack: CPython 3.6,
``setuptools < 58`` (its ``setup.py`` uses ``use_2to3``), numpy 1.19, scipy 1.5,
scikit-learn 0.22 (``sklearn.externals.joblib``), cvxopt (QP solver of the cutting-plane
learners) and ad3 (LP inference). All of these exist as cp36 manylinux wheels on PyPI;
only pystruct itself is compiled from its source distribution (two small C extensions,
about 10 s). The whole build takes about 25 s.

Usage (stdlib only, so any ``python3`` can run it)::

    python -m slr.baselines.peer.setup_env            # build if needed, print the env path
    python -m slr.baselines.peer.setup_env --force    # rebuild from scratch

The environment goes to ``$SLR_PEER_ENV`` (default ``~/.cache/slr/pystruct-peer``).
A stamp file written as the last step makes a second run instant; a half-built
directory (no stamp) is removed and rebuilt. A file lock serialises concurrent builds.

Exit status: 0 ready, 3 no CPython 3.6 interpreter found (callers should skip),
4 the build failed (log in ``<env>.build.log``).
"""
import argparse
import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

EXIT_OK = 0
EXIT_NO_PYTHON36 = 3
EXIT_BUILD_FAILED = 4

#: Bump when the recipe changes so existing environments are rebuilt.
SPEC_VERSION = 1
PIP_REQUIREMENT = "pip==21.3.1"  # last pip for Python 3.6
BINARY_REQUIREMENTS = [
    "setuptools==57.5.0",  # < 58: pystruct's setup.py passes use_2to3
    "wheel==0.37.1",
    "numpy==1.19.5",
    "scipy==1.5.4",
    "scikit-learn==0.22.2.post1",  # last release with sklearn.externals.joblib
    "joblib==1.1.1",
    "cvxopt==1.3.1",  # newest release with a cp36 wheel
    "ad3==2.2.1",
]
PYSTRUCT_REQUIREMENT = "pystruct==0.3.2"
STAMP_NAME = ".slr-peer-stamp.json"

_SMOKE_TEST = """
import numpy as np
from pystruct.models import ChainCRF
from pystruct.learners import OneSlackSSVM
import ad3, cvxopt
X = [np.array([[1., 0.], [0., 1.], [1., 1.]]), np.array([[0., 1.], [1., 0.]])]
Y = [np.array([0, 1, 1]), np.array([1, 0])]
ssvm = OneSlackSSVM(ChainCRF(), C=1.0, max_iter=20).fit(X, Y)
assert ssvm.score(X, Y) == 1.0, ssvm.score(X, Y)
print("pystruct peer smoke test ok")
"""


def default_env_dir() -> Path:
    """Where the peer environment lives: ``$SLR_PEER_ENV`` or ``~/.cache/slr/pystruct-peer``."""
    env = os.environ.get("SLR_PEER_ENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "slr" / "pystruct-peer"


def spec() -> dict:
    """The recipe recorded in the stamp; a different recipe triggers a rebuild."""
    return {
        "spec_version": SPEC_VERSION,
        "pip": PIP_REQUIREMENT,
        "binary": BINARY_REQUIREMENTS,
        "pystruct": PYSTRUCT_REQUIREMENT,
    }


def env_python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def is_ready(env_dir: Path) -> bool:
    """True when the environment was completely built with the current recipe."""
    stamp = env_dir / STAMP_NAME
    if not stamp.is_file() or not env_python(env_dir).exists():
        return False
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    return recorded.get("spec") == spec()


def _is_python36(executable: str) -> bool:
    try:
        out = subprocess.run(
            [executable, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.decode().strip() == "3.6"


def find_python36() -> "str | None":
    """Locate a CPython 3.6 interpreter.

    Order: ``$SLR_PEER_PYTHON``; ``pyenv prefix 3.6.15``; any ``~/.pyenv/versions/3.6.*``;
    ``python3.6`` on ``PATH``.
    """
    candidates = []
    explicit = os.environ.get("SLR_PEER_PYTHON")
    if explicit:
        candidates.append(explicit)
    pyenv_root = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")))
    pyenv = shutil.which("pyenv") or str(pyenv_root / "bin" / "pyenv")
    if os.path.exists(pyenv):
        try:
            out = subprocess.run(
                [pyenv, "prefix", "3.6.15"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                timeout=60,
                check=False,
            )
            if out.returncode == 0:
                candidates.append(str(Path(out.stdout.decode().strip()) / "bin" / "python"))
        except (OSError, subprocess.SubprocessError):
            pass
    candidates += sorted(glob.glob(str(pyenv_root / "versions" / "3.6.*" / "bin" / "python")),
                         reverse=True)
    on_path = shutil.which("python3.6")
    if on_path:
        candidates.append(on_path)
    for candidate in candidates:
        if os.path.exists(candidate) and _is_python36(candidate):
            return candidate
    return None


def _run(cmd: list, log, env: dict) -> None:
    log.write("\n$ %s\n" % " ".join(str(c) for c in cmd))
    log.flush()
    result = subprocess.run([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT,
                            env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError("command failed with status %d: %s"
                           % (result.returncode, " ".join(str(c) for c in cmd)))


def _build(python36: str, env_dir: Path, log) -> None:
    if env_dir.exists():
        shutil.rmtree(env_dir)
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # The host's pip configuration may point at local cp311-only mirrors; they are harmless,
    # but a user site or PYTHONPATH from the caller's interpreter must not leak in.
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    py = env_python(env_dir)
    pip = [py, "-m", "pip", "--no-input"]
    _run([python36, "-m", "venv", env_dir], log, env)
    # pip 18.1 (bundled with 3.6.15) crashes on PIP_NO_CACHE_DIR=1; only the upgrade runs on it
    old_pip_env = {k: v for k, v in env.items() if k != "PIP_NO_CACHE_DIR"}
    _run(pip + ["install", "--upgrade", PIP_REQUIREMENT], log, old_pip_env)
    # no bytecode ahead of time (5 of 12 s): the peer's first imports compile what it uses
    _run(pip + ["install", "--no-compile", "--only-binary", ":all:"] + BINARY_REQUIREMENTS, log, env)
    _run(pip + ["install", "--no-build-isolation", "--no-deps", "--no-binary", "pystruct",
                PYSTRUCT_REQUIREMENT], log, env)
    _run([py, "-W", "ignore", "-c", _SMOKE_TEST], log, env)


def ensure(env_dir: "Path | None" = None, *, force: bool = False, verbose: bool = True) -> int:
    """Build the peer environment unless it is ready; return an exit status (see module doc)."""
    env_dir = Path(env_dir) if env_dir is not None else default_env_dir()

    def say(msg: str) -> None:
        if verbose:
            print("[slr peer] " + msg, file=sys.stderr, flush=True)

    if not force and is_ready(env_dir):
        return EXIT_OK
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    lock_path = env_dir.parent / (env_dir.name + ".lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it right now
        if not force and is_ready(env_dir):
            return EXIT_OK
        python36 = find_python36()
        if python36 is None:
            say("no CPython 3.6 interpreter found (tried $SLR_PEER_PYTHON, pyenv 3.6.x, "
                "python3.6 on PATH); the pystruct peer cannot be built here. "
                "Install one with `pyenv install 3.6.15` to enable it.")
            return EXIT_NO_PYTHON36
        log_path = env_dir.parent / (env_dir.name + ".build.log")
        say("building the pystruct 0.3.2 peer environment in %s with %s (about half a minute; "
            "log: %s)" % (env_dir, python36, log_path))
        start = time.time()
        with open(log_path, "w") as log:
            try:
                _build(python36, env_dir, log)
            except (RuntimeError, OSError) as exc:
                log.write("\nFAILED: %s\n" % exc)
                log.flush()
                say("build failed: %s; see %s" % (exc, log_path))
                return EXIT_BUILD_FAILED
        seconds = time.time() - start
        stamp = {"spec": spec(), "python36": python36, "build_seconds": round(seconds, 1),
                 "built_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        (env_dir / STAMP_NAME).write_text(json.dumps(stamp, indent=1))
        say("peer environment ready after %.0f s" % seconds)
        return EXIT_OK


def main(argv: "list | None" = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", type=Path, default=None,
                        help="environment directory (default $SLR_PEER_ENV or "
                             "~/.cache/slr/pystruct-peer)")
    parser.add_argument("--force", action="store_true", help="rebuild from scratch")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    status = ensure(args.env, force=args.force, verbose=not args.quiet)
    if status == EXIT_OK:
        print(args.env if args.env is not None else default_env_dir())
    return status


if __name__ == "__main__":
    sys.exit(main())
