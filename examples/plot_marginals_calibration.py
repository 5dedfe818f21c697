"""
Marginals and calibration
=========================

:meth:`~slr.StructuredLogisticRegression.predict_marginals` gives two kinds of node marginals:
the smoothed LP's beliefs (``method="lp"``, on any graph: the quantities the model is trained
with) and, on chains, trees and small grids, the exact marginals of
``p(y | x) ∝ exp(F(x, y) / eps)`` (``method="exact"``, by sum-product). This example fits a
model on chains drawn from a known model and compares how well each kind is calibrated: in a
reliability diagram, a calibrated model's accuracy equals its confidence.
"""

# %%
# 120 chains of 30 nodes with 4 states, drawn from one known pairwise model
# (:func:`slr.datasets.synthetic.make_structured`): 60 to train on, 60 to test on.
import matplotlib.pyplot as plt

from slr import StructuredLogisticRegression
from slr.datasets.synthetic import make_structured
from slr.metrics import calibration_curve, node_log_loss
from slr.oracles import Linear

X_all, Y_all = make_structured(n_examples=120, graph="chain", n_nodes=30, n_states=4, coupling=2.0, random_state=0)
X, Y, X_test, Y_test = X_all[:60], Y_all[:60], X_all[60:], Y_all[60:]
model = StructuredLogisticRegression(Linear(l2=1.0), Linear(l2=1.0), epsilon=0.1, random_state=0).fit(X, Y)
print(f"test accuracy {model.score(X_test, Y_test):.3f} after {model.n_iter_} iterations ({model.stop_reason_})")

# %%
# Both kinds of marginals on the test chains, at the fit's ``epsilon``; their reliability
# curves and expected calibration errors (ECE), and the log loss of the true labels. With the
# same learned potentials, the smoothed LP's beliefs are the better calibrated: the model was
# trained through them.
marginals = {method: model.predict_marginals(X_test, method=method) for method in ("lp", "exact")}
curves = {method: calibration_curve(Y_test, m, n_bins=10) for method, m in marginals.items()}
for method, curve in curves.items():
    print(f"{method:>5}: ECE {curve.expected_error:.3f}, log loss {node_log_loss(Y_test, marginals[method]):.3f}")

# %%
# The reliability diagram.
fig, ax = plt.subplots(figsize=(4.5, 4.5))
ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="calibrated")
for (method, curve), marker in zip(curves.items(), ("o", "s")):
    used = curve.count > 0
    ax.plot(curve.confidence[used], curve.accuracy[used], marker=marker,
            label=f"{method} (ECE {curve.expected_error:.3f})")
ax.set_xlabel("confidence (largest marginal)")
ax.set_ylabel("accuracy")
ax.legend(loc="upper left")
fig.tight_layout()
plt.show()
