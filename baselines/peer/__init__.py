"""pystruct 0.3.2 as the outside peer: its learners run in a CPython 3.6 subprocess.

Build the environment once with ``python -m slr.baselines.peer.setup_env`` (or
:func:`ensure_peer_env`), then call :func:`run_peer` with slr/pystruct-format data.

The names below are imported lazily so that ``python -m slr.baselines.peer.setup_env`` runs
on a bare interpreter (standard library only) without importing numpy.
"""
from __future__ import annotations

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


def __getattr__(name: str):
    if name in __all__:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
