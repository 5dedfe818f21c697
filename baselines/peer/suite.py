"""The data of pystruct 0.3.2's test suite, made once in the peer environment and cached.

:func:`load_suite_data` runs ``suite_data.py`` (pystruct's own generators, in the CPython 3.6 peer
environment) the first time and keeps its ``.npz`` next to the environment, under a name that
changes with the script and the environment's recipe; later calls only read the file, so the peer
environment is needed once.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from . import setup_env
from .client import PeerRunError, ensure_peer_env

SCRIPT = Path(__file__).with_name("suite_data.py")

__all__ = ["load_suite_data", "suite_data_path"]


def suite_data_path() -> Path:
    """Where the cached data live: a file named by the digest of the script and the peer recipe."""
    digest = hashlib.sha256(SCRIPT.read_bytes() + json.dumps(setup_env.spec(), sort_keys=True).encode())
    env_dir = setup_env.default_env_dir()
    return env_dir.parent / "pystruct-suite-data" / f"{digest.hexdigest()[:16]}.npz"


def load_suite_data(verbose: bool = True, timeout: float = 600.0) -> dict[str, np.ndarray] | None:
    """pystruct's test data by name (``"<data set>/<field>"``), or None where no CPython 3.6 exists.

    Parameters
    ----------
    verbose : bool, default=True
        Progress of a first build of the peer environment on stderr.
    timeout : float, default=600.0
        Seconds the generating subprocess may take.

    Raises
    ------
    PeerUnavailableError
        The peer environment's build failed.
    PeerRunError
        The script failed in the peer environment.
    """
    path = suite_data_path()
    if not path.is_file():
        env_dir = ensure_peer_env(verbose=verbose)
        if env_dir is None:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        # written under a temporary name in the same directory, then renamed: concurrent test
        # sessions each produce the same file and never read a partial one
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            made = Path(tmp) / "data.npz"
            proc = subprocess.run([str(setup_env.env_python(env_dir)), "-I", str(SCRIPT), str(made)],
                                  capture_output=True, text=True, timeout=timeout, env=env)
            if proc.returncode != 0 or not made.is_file():
                raise PeerRunError(f"making pystruct's test data failed (status {proc.returncode}):\n"
                                   f"{proc.stderr[-4000:]}")
            os.replace(made, path)
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}
