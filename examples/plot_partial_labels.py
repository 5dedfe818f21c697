"""
Partial labels: unlabelled nodes as latent variables
====================================================

When some training nodes have no label (label ``-1``, or a masked entry of a masked array),
slr learns them as latent variables: every ``latent_iter`` iterations the model's smoothed LP,
with the labelled nodes clamped, supplies soft targets for them (:mod:`slr.latent`). The
alternative is to drop them with their edges. This example hides a growing share of the labels
of small denoising images and compares the two against a fit on every label, at equal work
(``slr partial_labels`` runs the same comparison on denoising and letters).
"""

# %%
# Six 20 x 20 training images; a seeded share of their labels hidden.
import matplotlib.pyplot as plt
import numpy as np

from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.oracles import Linear

X, Y = make_denoising(n_images=6, size=20, sigma=2.0, random_state=0)
X_test, Y_test = make_denoising(n_images=6, size=20, sigma=2.0, random_state=1)


def hide(Y, share, seed=0):
    rng = np.random.default_rng(seed)
    return [np.where(rng.random(y.shape) < share, -1, y) for y in Y]


def labelled_subgraphs(X, Y):
    """Each image restricted to its labelled nodes and the edges between them."""
    X_kept, Y_kept = [], []
    for (nodes, edges, edge_features), y in zip(X, Y):
        keep = y >= 0
        index = np.cumsum(keep) - 1
        kept = keep[edges[:, 0]] & keep[edges[:, 1]]
        X_kept.append((nodes[keep], index[edges[kept]], edge_features[kept]))
        Y_kept.append(y[keep])
    return X_kept, Y_kept


def test_error(X, Y):
    model = StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), max_iter=15, tol=0, random_state=0)
    return 1 - model.fit(X, Y).score(X_test, Y_test)


# %%
# The three fits at each share of hidden labels; the full fit once.
full = test_error(X, Y)
shares = (0.25, 0.5, 0.75)
errors = {"drop": [], "latent": []}
for share in shares:
    partial = hide(Y, share)
    errors["drop"].append(test_error(*labelled_subgraphs(X, partial)))
    errors["latent"].append(test_error(X, partial))
    print(f"{share:.0%} hidden: drop {errors['drop'][-1]:.3f}, latent {errors['latent'][-1]:.3f} "
          f"(every label: {full:.3f})")

# %%
# Dropping a node also drops its edges, and with them what the pairwise function learns from
# its neighbours; a latent node keeps them.
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.axhline(full, color="grey", linestyle=":", label="every label")
for (method, values), marker in zip(errors.items(), ("s", "o")):
    ax.plot([100 * s for s in shares], values, marker=marker, label=method)
ax.set_xlabel("training labels hidden (%)")
ax.set_ylabel("test error")
ax.legend()
fig.tight_layout()
plt.show()
