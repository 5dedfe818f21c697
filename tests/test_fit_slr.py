"""The suite's slr rows: fitted on the training examples alone, the test curve recorded by callback."""
from __future__ import annotations

import numpy as np
import pytest

from slr.datasets.synthetic import make_structured
from slr.oracles import MLP, Constant, Linear
from slr_suite.methods import fit_slr
from slr_suite.oracles import defaults_learner


def _data(n_train: int) -> tuple:
    X, Y = make_structured(n_train + 6, graph="chain", n_nodes=8, n_states=3, coupling=1.0, noise=2.0, random_state=3)
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:], 3


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")   # max_iter=12: a short fit
@pytest.mark.parametrize("unary, n_train", [(Linear(), 8), (MLP(n_hidden=10), 20)])
def test_the_test_examples_choose_nothing_and_the_curve_is_each_iterations_test_error(unary, n_train):
    data = _data(n_train)
    Xtr, Ytr, Xte, Yte, _ = data
    kw = dict(unary=unary, pairwise=Constant(), n_jobs=1, random_state=0, max_iter=12)
    model = defaults_learner(**kw)
    row, seconds, errors = fit_slr(model, data)
    alone = defaults_learner(**kw).fit(Xtr, Ytr)   # the same fit without the suite's recording
    for a, b in zip(model.predict(Xte), alone.predict(Xte)):
        np.testing.assert_array_equal(a, b)
    assert row["test_error"] == 1.0 - alone.score(Xte, Yte) and row["iterations"] == alone.n_iter_
    assert (model.best_iteration_ is not None) == (n_train == 20)   # MLP with 20 examples: "auto" holds 2 out
    assert len(errors) == len(seconds) == model.n_iter_ and np.all(np.diff(seconds) >= 0)
    np.testing.assert_array_equal(seconds, model.history_["seconds"].iloc[1:])
    for t in (1, model.n_iter_):   # the curve: the test error of the model after iteration t
        stopped = defaults_learner(**{**kw, "max_iter": t}, tol=0, early_stopping=False)
        stopped.fit(*(([Xtr[k] for k in model._validation_split[0]], [Ytr[k] for k in model._validation_split[0]])
                      if model._validation_split is not None else (Xtr, Ytr)))
        assert errors[t - 1] == pytest.approx(1.0 - stopped.score(Xte, Yte), abs=1e-12)
