"""Saved models that know their versions: what a pickle records, and the warning on loading it
under other versions (as scikit-learn's ``InconsistentVersionWarning`` does for scikit-learn)."""
from __future__ import annotations

import warnings
from typing import Any, cast

__all__ = ["InconsistentVersionWarning", "VersionedPickle", "current_versions"]

_STATE_KEY = "_slr_versions"


class InconsistentVersionWarning(UserWarning):
    """A model unpickled under other versions of slr, numpy or scikit-learn than it was saved with:
    it may fail or predict differently. Refit it, or load it with the versions it names."""


def current_versions() -> dict[str, str]:
    """The versions of slr, numpy and scikit-learn of this process."""
    import numpy
    import sklearn

    import slr

    return {"slr": slr.__version__, "numpy": numpy.__version__, "scikit-learn": sklearn.__version__}


class VersionedPickle:
    """Mixin for estimators: ``__getstate__`` records :func:`current_versions`, ``__setstate__``
    warns with :class:`InconsistentVersionWarning` when they differ from this process's (or when a
    pickle recorded none). Place it before ``BaseEstimator`` in the bases."""

    def __getstate__(self) -> dict[str, Any]:
        # the next class in the MRO (BaseEstimator) pickles the state; mypy sees only object
        state = dict(cast(Any, super()).__getstate__())
        state[_STATE_KEY] = current_versions()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        saved = state.pop(_STATE_KEY, None)
        now = current_versions()
        if saved is None:
            warnings.warn(f"this {type(self).__name__} was pickled by a version of slr that did not record its "
                          f"versions; it is loaded under {_listing(now)} and may fail or predict differently",
                          InconsistentVersionWarning, stacklevel=2)
        elif saved != now:
            changed = {name: version for name, version in saved.items() if now.get(name) != version}
            warnings.warn(f"this {type(self).__name__} was pickled under {_listing(changed)} and is loaded under "
                          f"{_listing({name: now.get(name, '?') for name in changed})}; it may fail or predict "
                          "differently: refit it, or load it with the versions it was saved with",
                          InconsistentVersionWarning, stacklevel=2)
        cast(Any, super()).__setstate__(state)


def _listing(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())
