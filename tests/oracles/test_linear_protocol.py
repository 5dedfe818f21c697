"""A user's oracle linear in its parameters (slr.oracles.linear_protocol) reaches the joint solver and
the Dask learner: fitted through its design matrix, it gives the fit of Linear on that design."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.oracles import Constant, Linear, LogisticOracle, OracleTags, Zero
from slr.oracles.linear_protocol import LinearInParameters, is_linear_in_parameters


class Squares(LogisticOracle):
    """``g(x) = W [x, x^2]``, ridge ``l2``: a linear oracle written against the protocol only."""

    def __init__(self, l2: float = 1.0) -> None:
        self.l2 = l2

    def __slr_tags__(self) -> OracleTags:
        return OracleTags(linear_parameters=("coef_",), penalty=True)

    def penalty(self) -> float:
        coef = getattr(self, "coef_", None)
        return 0.0 if coef is None else 0.5 * self.l2 * float(np.sum(coef * coef))

    def design_matrix(self, features):
        features = np.asarray(features)
        return np.hstack([features, features ** 2])

    def ridge_weights(self, n_features: int) -> np.ndarray:
        return np.full(2 * n_features, float(self.l2))

    def get_coef_block(self, n_classes: int, n_features: int) -> np.ndarray:
        coef = getattr(self, "coef_", None)
        return coef.copy() if coef is not None and coef.shape == (n_classes, 2 * n_features) \
            else np.zeros((n_classes, 2 * n_features))

    def set_coef_block(self, coef, n_features, *, n_iter, converged) -> None:
        self.n_classes_, self.n_features_in_, self.coef_ = coef.shape[0], n_features, coef.copy()

    def capped_fits(self, max_iter: int):
        from contextlib import nullcontext
        return nullcontext()

    def _fit(self, features, bias, labels, sample_weight, params: dict[str, Any]) -> None:
        solver = Linear(l2=self.l2)
        if hasattr(self, "coef_"):
            solver.coef_, solver.intercept_ = self.coef_, np.zeros(self.coef_.shape[0])
            solver.n_classes_, solver.n_features_in_ = self.coef_.shape
        solver.fit(self.design_matrix(features), bias, labels, sample_weight)
        self.coef_ = solver.coef_

    def decision_function(self, features) -> np.ndarray:
        features = self._check_features(features)
        return self.design_matrix(features) @ self.coef_.T


def _squared(X):
    """The examples with the node features replaced by Squares' design of them."""
    return [(np.hstack([x, x ** 2]), edges, edge_features) for x, edges, edge_features in X]


@pytest.fixture(scope="module")
def images():
    return make_denoising(n_images=4, size=10, sigma=3.0, random_state=0)


def test_the_shipped_linear_oracles_implement_the_protocol():
    for oracle in (Linear(), Linear(l2=1.0, fit_intercept=True), Constant(l2=0.5), Zero(), Squares()):
        assert isinstance(oracle, LinearInParameters) and is_linear_in_parameters(oracle)
    assert not is_linear_in_parameters(Linear(l1=0.1))   # not a ridge: not smooth


def test_block_round_trip_and_design():
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    oracle = Linear(fit_intercept=True)
    np.testing.assert_array_equal(oracle.design_matrix(x), np.c_[x, np.ones(2)])
    np.testing.assert_array_equal(oracle.ridge_weights(2), [0.0, 0.0, 0.0])
    block = np.arange(6.0).reshape(2, 3)
    oracle.set_coef_block(block, 2, n_iter=3, converged=True)
    np.testing.assert_array_equal(oracle.coef_, block[:, :2])
    np.testing.assert_array_equal(oracle.intercept_, block[:, 2])
    np.testing.assert_allclose(oracle.decision_function(x), oracle.design_matrix(x) @ block.T)
    np.testing.assert_array_equal(oracle.get_coef_block(2, 2), block)
    assert not oracle.get_coef_block(3, 2).any()   # another shape: zeros
    with oracle.capped_fits(5):
        assert oracle.max_iter == 5
    assert oracle.max_iter == 1000


def test_a_users_linear_oracle_reaches_the_joint_solver(images):
    X, Y = images
    settings = dict(epsilon=0.1, max_iter=6, tol=0, n_jobs=1, solver="joint")
    users = StructuredLogisticRegression(unary=Squares(l2=1.0), **settings).fit(X, Y)
    linear = StructuredLogisticRegression(unary=Linear(l2=1.0), **settings).fit(_squared(X), Y)
    assert users.solver_ == "joint"
    np.testing.assert_allclose(users.objective_trace_["penalised"], linear.objective_trace_["penalised"],
                               rtol=1e-9)
    np.testing.assert_allclose(users.unary_.coef_, linear.unary_.coef_, rtol=1e-6, atol=1e-9)
    assert users.history_["objective"].iloc[-1] < 0.8 * users.history_["objective"].iloc[0]


def test_a_users_linear_oracle_reaches_the_dask_learner(client, images):
    from slr.distributed import DaskStructuredLogisticRegression

    X, Y = images
    settings = dict(max_iter=3, tol=0, n_jobs=1, solver="alternation")
    dist = DaskStructuredLogisticRegression(unary=Squares(l2=1.0), n_partitions=3, **settings).fit(X, Y)
    local = StructuredLogisticRegression(unary=Squares(l2=1.0), **settings).fit(X, Y)
    np.testing.assert_allclose(dist.objective_trace_["objective"], local.objective_trace_["objective"], rtol=1e-8)
    for y_dist, y_local in zip(dist.predict(X), local.predict(X)):
        np.testing.assert_array_equal(y_dist, y_local)
    # the Zero oracle, linear in no parameters, reaches it too
    zero = DaskStructuredLogisticRegression(pairwise=Zero(), n_partitions=2, **settings).fit(X, Y)
    assert not zero.history_["objective"].isna().any()
