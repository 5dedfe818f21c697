"""Choose the nonlinear letters rows' settings on a validation split of the training words only.

``python -m slr.suite.letters_validation [--n-train N] SPEC [SPEC ...]`` fits slr with each
``SPEC`` (JSON: ``unary`` "MLP" | "BoostedTrees" | "Linear" and its keywords; optional
``epsilon``, ``max_iter``, ``max_sweeps``) and a Constant pairwise table on four fifths of the
training words of fold 1 (``N`` of them, drawn as the profiles draw them, when given),
with the other fifth, drawn at random with seed 0, as validation data; it prints the
validation error after every iteration and the fit time (1 thread). The test words are never
loaded. docs/design.md section 6 lists what it measured.
"""
from __future__ import annotations

import argparse
import json


__all__ = ["letters_split", "validate"]


def letters_split(n_train: int | None = None, seed: int = 0):
    """``(X_fit, Y_fit, X_val, Y_val)``: fold 1's words (``n_train`` of them, drawn as
    :class:`slr.suite.methods.LettersData` draws them), a random fifth held out
    (:func:`slr.suite.common.hold_out`)."""
    from slr.datasets import load_letters
    from slr.suite.common import hold_out
    from slr.suite.methods import LettersData

    X, Y, folds = load_letters()
    train, _ = LettersData(n_train, 0).indices(folds)
    return hold_out([X[i] for i in train], [Y[i] for i in train], seed)


def validate(spec: dict, split) -> "object":
    """The history (validation error against fit time) of one setting on ``split``."""
    from threadpoolctl import threadpool_limits

    from slr.suite.oracles import OracleSpec, suite_learner

    spec = dict(spec)
    kind = spec.pop("unary")
    settings = {key: spec.pop(key) for key in ("epsilon", "max_iter", "max_sweeps") if key in spec}
    unary = OracleSpec(kind, spec).build(random_state=0)
    X_fit, Y_fit, X_val, Y_val = split
    with threadpool_limits(1):
        model = suite_learner(unary=unary, pairwise=OracleSpec("Constant").build(), n_states=26, n_jobs=1,
                              random_state=0, **settings)
        model.fit(X_fit, Y_fit, X_val=X_val, Y_val=Y_val)
    return model.history_.dropna(subset=["val_error"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=None, help="N training words drawn at random (quick: 100)")
    parser.add_argument("specs", nargs="+", help="JSON settings, e.g. '{\"unary\": \"MLP\", \"max_iter\": 12}'")
    args = parser.parse_args(argv)
    split = letters_split(args.n_train)
    print(f"{len(split[0])} words to fit, {len(split[2])} to validate")
    for text in args.specs:
        hist = validate(json.loads(text), split)
        best = hist["val_error"].idxmin()
        print(f"{text}: best {hist['val_error'][best]:.4f} at iteration {int(hist['iteration'][best])} "
              f"({hist['seconds'][best]:.1f} s); curve "
              + " ".join(f"{e:.3f}" for e in hist["val_error"]), flush=True)


if __name__ == "__main__":
    main()
