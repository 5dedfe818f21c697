"""``early_stopping="auto"``: on with validation data, or when an oracle asks for it (its tags'
``validation_stopping``) and there are enough examples to hold a share out."""
from __future__ import annotations

import math

import numpy as np
import pytest

from slr import StructuredLogisticRegression
from slr.datasets.synthetic import make_structured
from slr.oracles import MLP, BoostedTrees, Constant, Linear, OracleTags, Zero, get_oracle_tags

_MIN = 20   # the documented minimum number of examples for "auto" to hold some out


def _problem(n_examples: int, seed: int = 0) -> tuple[list, list]:
    return make_structured(n_examples, graph="chain", n_nodes=10, n_states=3, coupling=1.0, n_features=10,
                           noise=2.0, random_state=seed)


class _Untagged:
    """A third-party oracle: fit and decision_function, no tags (a network inside)."""

    def __init__(self) -> None:
        self.inner = MLP(n_hidden=5, random_state=0)

    def fit(self, X, bias, y, sample_weight=None):
        self.inner.fit(X, bias, y, sample_weight=sample_weight)
        return self

    def decision_function(self, X):
        return self.inner.decision_function(X)


def test_the_tag_marks_the_oracles_that_ask_for_validation_stopping():
    assert get_oracle_tags(MLP()).validation_stopping is True
    others = (BoostedTrees(), Zero(), Constant(), Linear(), _Untagged())
    assert [get_oracle_tags(o).validation_stopping for o in others] == [False] * 5
    assert OracleTags().validation_stopping is False


@pytest.mark.parametrize("n_examples", [_MIN - 1, _MIN, 24])
@pytest.mark.parametrize("unary, pairwise, asks", [
    (MLP(n_hidden=5), Constant(), True),
    (Linear(), MLP(n_hidden=5), True),
    (BoostedTrees(n_rounds=2), Constant(), False),
    (Linear(), Constant(), False),
    (_Untagged(), Constant(), False),
])
@pytest.mark.parametrize("with_val", [False, True])
def test_auto_turns_on_exactly_per_the_rule(n_examples, unary, pairwise, asks, with_val):
    X, Y = _problem(n_examples)
    Xv, Yv = _problem(3, seed=1)
    model = StructuredLogisticRegression(unary, pairwise, max_iter=2, tol=0, n_jobs=1, random_state=0)
    model.fit(X, Y, **(dict(X_val=Xv, Y_val=Yv) if with_val else {}))
    on = with_val or (asks and n_examples >= _MIN)
    assert (model.best_iteration_ is not None) == on
    split = model._validation_split
    if on and not with_val:   # a tenth of the examples held out, rounded up; the rest fitted
        assert len(split[1]) == math.ceil(0.1 * n_examples) and len(split[0]) + len(split[1]) == n_examples
        assert np.isfinite(model.history_["val_error"].iloc[1:]).all()
    else:
        assert split is None
        assert np.isfinite(model.history_["val_error"].iloc[1:]).all() == with_val
    forced = StructuredLogisticRegression(unary, pairwise, max_iter=2, tol=0, n_jobs=1, random_state=0,
                                          early_stopping=False).fit(X, Y)
    assert forced.best_iteration_ is None and forced._validation_split is None


def test_auto_holds_nothing_out_when_the_fraction_would_take_every_example():
    X, Y = _problem(_MIN)
    model = StructuredLogisticRegression(MLP(n_hidden=5), Constant(), max_iter=2, tol=0, n_jobs=1,
                                         validation_fraction=0.99).fit(X, Y)   # 20 of 20
    assert model.best_iteration_ is None and model._validation_split is None


def _rule_holds(J, t, tol):
    return t >= 3 and J[t - 3] - J[t] < 3 * tol * max(J[t - 3], J[t], 1.0)


def test_a_memorising_mlp_stops_early_at_its_lowest_held_out_error():
    """R falls fast (the network memorises the noisy training chains) while the held-out error rises:
    auto early stopping ends the fit, and keeps the last iteration with the lowest held-out error,
    which a fit of that many iterations on the other examples reproduces."""
    X, Y = _problem(24)
    kw = dict(unary=MLP(n_hidden=30), pairwise=Constant(), n_jobs=1, random_state=0, n_iter_no_change=5)
    model = StructuredLogisticRegression(**kw, max_iter=60).fit(X, Y)
    fit_on, held_out = model._validation_split
    Xh, Yh = [X[k] for k in held_out], [Y[k] for k in held_out]
    errors = model.history_.set_index("iteration")["val_error"].iloc[1:]
    best = int(errors[errors == errors.min()].index.max())
    assert (errors.loc[best + 1:] > errors[best]).all()   # above the lowest after it, for the patience
    assert model.stop_reason_ == "early_stopping" and model.best_iteration_ == best
    assert model.n_iter_ == best + 5 < 60
    J = model.objective_trace_.groupby("iteration", sort=False)["penalised"].last().to_numpy()
    assert not any(_rule_holds(J, t, 1e-4) for t in range(len(J)))   # the rule on R would not have stopped it
    assert model.history_["train_error"].iloc[-1] < model.history_["train_error"].iloc[best]   # memorising
    # independently: the same seeds, that many iterations on the other examples, no early stopping
    short = StructuredLogisticRegression(**kw, max_iter=best, early_stopping=False, tol=0).fit(
        [X[k] for k in fit_on], [Y[k] for k in fit_on])
    assert 1.0 - short.score(Xh, Yh) == pytest.approx(errors[best], abs=1e-12)
    for a, b in zip(model.predict(X), short.predict(X)):
        np.testing.assert_array_equal(a, b)
    for t in (1, best + 2):   # the errors the history recorded are those of the model at that iteration
        at = StructuredLogisticRegression(**kw, max_iter=t, early_stopping=False, tol=0).fit(
            [X[k] for k in fit_on], [Y[k] for k in fit_on])
        assert 1.0 - at.score(Xh, Yh) == pytest.approx(errors[t], abs=1e-12)


def test_a_model_that_held_examples_out_fits_again_and_continues():
    """The held-out split is a fitted attribute: a second fit draws the same split and repeats the
    first fit; a warm start keeps the split and continues from the kept iteration."""
    X, Y = _problem(24)
    kw = dict(unary=MLP(n_hidden=10), pairwise=Constant(), n_jobs=1, random_state=0, n_iter_no_change=3, max_iter=12)
    model = StructuredLogisticRegression(**kw).fit(X, Y)
    split, history = model._validation_split, model.history_.copy()
    assert split is not None
    model.fit(X, Y)
    for fresh, again in zip(split, model._validation_split):
        np.testing.assert_array_equal(fresh, again)
    for column in ("objective", "val_error"):
        np.testing.assert_array_equal(model.history_[column], history[column])
    kept = model.best_iteration_
    model.set_params(warm_start=True, max_iter=kept + 2).fit(X, Y)
    for fresh, kept_split in zip(split, model._validation_split):
        np.testing.assert_array_equal(fresh, kept_split)
    assert model.n_iter_ == kept + 2 and model.history_["iteration"].tolist() == list(range(kept + 3))


def test_held_out_examples_without_a_labelled_node_are_refused(learner_class):
    """Early stopping scores the examples it holds out; with no labelled node among them no
    validation error exists, and the fit says so instead of failing inside."""
    X, Y = make_structured(8, graph="chain", n_nodes=5, n_states=3, n_features=4, random_state=1)
    Y = [np.array(y) if k < 2 else np.full(len(y), -1) for k, y in enumerate(Y)]
    model = learner_class(Linear(), Linear(), max_iter=3, early_stopping=True, validation_fraction=0.5,
                          random_state=0, n_jobs=1)
    held_out = np.random.default_rng(0).permutation(8)[:4]   # the learner's split at random_state=0
    assert held_out.min() >= 2, "the seed must hold out only unlabelled examples"
    with pytest.raises(ValueError, match=r"early stopping held out 4 examples of X \(validation_fraction=0.5\) "
                                         r"without a labelled node"):
        model.fit(X, Y)
