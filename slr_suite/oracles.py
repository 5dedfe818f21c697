"""Build the function classes of Table 1 for a profile, and find the fitted ones on a learner."""
from __future__ import annotations

from typing import Any

__all__ = ["make_oracle", "fitted_oracle"]


def make_oracle(name: str, role: str, cfg: dict, seed: int) -> Any:
    """A fresh oracle of class ``name`` for the ``"unary"`` or ``"pairwise"`` factor.

    ``cfg`` is a profile's ``denoise`` dict (its ``trees`` and ``mlp`` entries; ``l2``, the
    ridge of ``Linear``, 0 if absent; ``linear``, further ``Linear`` keywords). ``Boost`` boosts
    with ``cfg["trees"]`` and ``ChapterBoost`` with ``cfg["chapter_trees"]`` (the chapter's
    protocol, computed beside Table 1). The MLP uses the paper's steps, .25 for unary and .05 for
    pairwise factors, and ``cfg["mlp"]``, updated by ``cfg["mlp_pairwise"]`` for pairwise factors.
    """
    from slr import oracles

    if name == "Zero":
        return oracles.Zero()
    if name == "Constant":
        return oracles.Constant()
    if name == "Linear":
        return oracles.Linear(l2=cfg.get("l2", 0.0), **cfg.get("linear", {}))
    if name == "Boost":
        return oracles.BoostedTrees(step=0.25, random_state=seed, **cfg.get("trees", {}))
    if name == "ChapterBoost":
        return oracles.BoostedTrees(step=0.25, random_state=seed, **cfg.get("chapter_trees", {}))
    if name == "MLP":
        rate = 0.25 if role == "unary" else 0.05
        settings = {**cfg.get("mlp", {}), **(cfg.get("mlp_pairwise", {}) if role == "pairwise" else {})}
        return oracles.MLP(learning_rate=rate, random_state=seed, **settings)
    if name == "LightGBM":
        return oracles.LightGBM()
    raise ValueError(f"unknown function class {name!r}")


def fitted_oracle(model: Any, role: str, given: Any) -> Any | None:
    """The fitted oracle of a learner for ``role`` (``"unary"``/``"pairwise"``), or None.

    Tries the learner's fitted attributes first (``unary_``, ``unary_oracle_``, ...), then the
    oracle instance passed to the constructor if the learner fitted it in place.
    """
    for attr in (f"{role}_", f"{role}_oracle_", f"{role}_estimator_", f"{role}_oracles_"):
        obj = getattr(model, attr, None)
        if isinstance(obj, (list, tuple)) and obj:
            obj = obj[-1]
        if obj is not None and hasattr(obj, "decision_function") and hasattr(obj, "n_classes_"):
            return obj
    if given is not None and hasattr(given, "n_classes_"):
        return given
    return None
