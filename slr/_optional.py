"""Imports of the dependencies that come with an extra (``pip install "slr[exact]"``)."""
from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["import_optional"]


def import_optional(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module``, or say which extra installs it.

    Parameters
    ----------
    module : str
        The module to import, e.g. ``"cvxpy"``.
    extra : str
        The extra of slr that installs it, e.g. ``"exact"``.
    feature : str
        What needs it, for the message, e.g. ``"the exact LP references"``.

    Returns
    -------
    module

    Raises
    ------
    ImportError
        ``<feature> needs <module>: pip install "slr[<extra>]"``, from the original error.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f'{feature} needs {module.split(".")[0]}: pip install "slr[{extra}]"') from error
