"""What the Dask learner's tests compare it with: the settings both learners fit with, and the check
that two fits are the same fit."""
from __future__ import annotations

import numpy as np

# the distributed fit runs Algorithm 1.1; the single-process one is pinned to it (its "auto" takes the
# joint solver for linear oracles); eps .1, the scale the tests' thresholds on R were set at
SETTINGS = dict(max_iter=3, tol=0, random_state=0, n_jobs=1, solver="alternation", epsilon=0.1)


def assert_same_fit(single, dist, X) -> None:
    """R after every half step to 1e-8 (relative) and the same MAP labels."""
    a = single.objective_trace_["objective"].to_numpy()
    b = dist.objective_trace_["objective"].to_numpy()
    assert a.shape == b.shape and (single.objective_trace_["stage"] == dist.objective_trace_["stage"]).all()
    np.testing.assert_allclose(b, a, rtol=1e-8, atol=0)
    np.testing.assert_allclose(dist.history_["objective"], single.history_["objective"], rtol=1e-8)
    np.testing.assert_array_equal(dist.history_["train_error"], single.history_["train_error"])
    for y_single, y_dist in zip(single.predict(X), dist.predict(X)):
        np.testing.assert_array_equal(y_dist, y_single)
