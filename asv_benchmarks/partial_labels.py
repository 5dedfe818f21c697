"""Partial labels: test error with 25 / 50 / 75% of the training nodes' labels hidden.

Run from the repository root::

    .venv/bin/python asv_benchmarks/partial_labels.py [--dataset denoising letters] [--hidden 0.25 0.5 0.75] [--l2 1.0]

For each data set (denoising: the suite's ``quick`` images, 16 + 16 of 32 x 32; letters: the first
``--words`` words of fold 1 to train, the first 500 of the other folds to test) and each fraction of
hidden labels (drawn per node, the same nodes for both methods) it fits ``StructuredLogisticRegression``
with the library's defaults (Linear / Linear, eps 0.1, 25 iterations; ``--l2``: the unary Linear's ridge
penalty, 0 by default) and prints the per-node test error of

* ``full``: every label given;
* ``drop``: the unlabelled nodes and their edges removed (train on the labelled subgraphs);
* ``latent``: the unlabelled nodes kept as latent variables (label -1; :mod:`slr.latent`).
"""
from __future__ import annotations

import argparse
import warnings

import numpy as np

from slr import StructuredLogisticRegression
from slr.oracles import Linear


def load(dataset: str, words: int) -> tuple:
    """``(X_train, Y_train, X_test, Y_test)``."""
    if dataset == "denoising":
        from slr.datasets import make_denoising

        Xtr, Ytr = make_denoising(16, 32, 3.2, random_state=0)
        Xte, Yte = make_denoising(16, 32, 3.2, random_state=1)
        return Xtr, Ytr, Xte, Yte
    from slr.datasets import load_letters

    X, Y, folds = load_letters()
    train, test = np.flatnonzero(folds == 1)[:words], np.flatnonzero(folds != 1)[:500]
    return [X[i] for i in train], [Y[i] for i in train], [X[i] for i in test], [Y[i] for i in test]


def labelled_subgraphs(X: list, Y: list) -> tuple[list, list]:
    """Each example restricted to its labelled nodes (label >= 0) and the edges between them;
    examples without a labelled node are left out."""
    X_out, Y_out = [], []
    for (nodes, edges, edge_features), y in zip(X, Y):
        keep = y >= 0
        if not keep.any():
            continue
        index = np.cumsum(keep) - 1
        kept_edges = keep[edges[:, 0]] & keep[edges[:, 1]]
        X_out.append((nodes[keep], index[edges[kept_edges]], edge_features[kept_edges]))
        Y_out.append(y[keep])
    return X_out, Y_out


def error(model: StructuredLogisticRegression, X: list, Y: list) -> float:
    return 1.0 - model.score(X, Y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", default=["denoising", "letters"], choices=["denoising", "letters"])
    parser.add_argument("--hidden", nargs="+", type=float, default=[0.25, 0.5, 0.75])
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--max-iter", type=int, default=25)
    parser.add_argument("--l2", type=float, default=0.0, help="ridge penalty of the unary Linear oracle")
    args = parser.parse_args()
    warnings.simplefilter("ignore")   # MAP decoding's convergence notes on loopy test images

    for dataset in args.dataset:
        Xtr, Ytr, Xte, Yte = load(dataset, args.words)
        n_states = int(max(y.max() for y in Ytr + Yte)) + 1

        def fit(X, Y):
            return StructuredLogisticRegression(Linear(l2=args.l2), max_iter=args.max_iter, n_states=n_states,
                                                monitor=False, random_state=0).fit(X, Y)

        n_nodes = sum(len(y) for y in Ytr)
        print(f"{dataset}: {len(Ytr)} training examples ({n_nodes} nodes), {len(Yte)} test examples, "
              f"unary l2 {args.l2:g}")
        print(f"  full labels               test error {error(fit(Xtr, Ytr), Xte, Yte):.4f}")
        for hidden in args.hidden:
            rng = np.random.default_rng(0)
            partial = [np.where(rng.random(y.shape) < hidden, -1, y) for y in Ytr]
            dropped = fit(*labelled_subgraphs(Xtr, partial))
            latent = fit(Xtr, partial)
            print(f"  {hidden:4.0%} hidden   drop     test error {error(dropped, Xte, Yte):.4f}")
            print(f"  {hidden:4.0%} hidden   latent   test error {error(latent, Xte, Yte):.4f}")


if __name__ == "__main__":
    main()
