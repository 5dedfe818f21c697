"""
Inference on a grid: the smoothed LP and its limit
==================================================

slr's inference is message passing on the entropy-smoothed LP relaxation of a pairwise model
(user guide: :doc:`/guide/model`). On a 4-connected grid with random potentials, this example
computes the smoothed LP at several temperatures ``epsilon``: its value falls towards the LP
bound as ``epsilon`` shrinks, and its node marginals sharpen towards the MAP labelling that
:func:`slr.inference.map_lp` decodes (``epsilon = 0``).
"""

# %%
# A 20 x 20 grid with three states per node: ``theta_nodes`` is ``(n, L)`` and ``theta_edges``
# ``(m, L, L)``, the score of each pair of states of an edge ``(i, j)``.
import matplotlib.pyplot as plt
import numpy as np

from slr.graph import grid_edges
from slr.inference import map_lp, smoothed_lp

size, n_states = 20, 3
edges = grid_edges(size, size)
rng = np.random.default_rng(0)
theta_nodes = rng.normal(size=(size * size, n_states))
theta_edges = np.repeat(0.5 * np.eye(n_states)[None], len(edges), axis=0)   # neighbours agree

# %%
# The smoothed LP at decreasing ``epsilon``, and the LP itself.
decoded = map_lp(theta_nodes, theta_edges, edges)
print(f"LP bound {decoded.value:.2f}, converged: {decoded.converged}")
results = {}
for epsilon in (1.0, 0.3, 0.1):
    results[epsilon] = smoothed_lp(theta_nodes, theta_edges, edges, epsilon=epsilon)
    print(f"eps={epsilon:<5} value {results[epsilon].value:8.2f}  converged: {results[epsilon].converged}")

# %%
# The belief in state 0 at each temperature next to the decoded labelling: at small
# ``epsilon`` the marginals are nearly the labelling's indicator.
fig, axes = plt.subplots(1, len(results) + 1, figsize=(12, 2.8))
for ax, (epsilon, result) in zip(axes, results.items()):
    ax.imshow(result.node_marginals[:, 0].reshape(size, size), vmin=0, vmax=1, cmap="viridis")
    ax.set_title(f"eps = {epsilon}")
axes[-1].imshow(decoded.labels.reshape(size, size), cmap="tab10", vmin=0, vmax=9)
axes[-1].set_title("MAP (eps = 0)")
for ax in axes:
    ax.set_axis_off()
fig.tight_layout()
plt.show()
