"""pystruct 0.3.2 as the outside peer: its learners run in a CPython 3.6 subprocess.

Build the environment once with ``python -m baselines.peer.setup_env`` (or
:func:`ensure_peer_env`), then call :func:`run_peer` with slr/pystruct-format data.
"""
from .client import (
    LEARNERS,
    MODELS,
    PeerRunError,
    PeerUnavailableError,
    ensure_peer_env,
    peer_available,
    peer_env_dir,
    peer_python,
    run_peer,
    unpack_weights,
)

__all__ = [
    "LEARNERS",
    "MODELS",
    "PeerRunError",
    "PeerUnavailableError",
    "ensure_peer_env",
    "peer_available",
    "peer_env_dir",
    "peer_python",
    "run_peer",
    "unpack_weights",
]
