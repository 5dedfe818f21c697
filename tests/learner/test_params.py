"""The declarative parameter checks (slr._params)."""
from __future__ import annotations


import numpy as np
import pytest

from slr._params import Boolean, Checked, Integer, NJobs, Options, RandomState, Real, Satisfies, validate_params


class _Estimator:
    _parameter_constraints = {
        "max_iter": Integer(1),
        "rate": (Options(("auto",)), Real(0.0, low_open=True)),
        "n_states": (None, Integer(1)),
        "shuffle": Boolean(),
        "random_state": RandomState(),
        "grid": Satisfies(lambda v: isinstance(v, tuple) and len(v) > 0, "a non-empty tuple"),
    }

    def __init__(self, **params):
        self.params = dict(max_iter=5, rate="auto", n_states=None, shuffle=True, random_state=None,
                           grid=(1,), unchecked=None)
        self.params.update(params)

    def get_params(self, deep=False):
        return dict(self.params)


def test_valid_parameters_come_back_converted():
    checked = validate_params(_Estimator(max_iter=np.int32(7), rate=1, n_states=np.int64(3), random_state=np.int8(4)))
    assert checked["max_iter"] == 7 and type(checked["max_iter"]) is int
    assert checked["rate"] == 1.0 and type(checked["rate"]) is float
    assert checked["n_states"] == 3 and checked["random_state"] == 4 and checked["grid"] == (1,)
    assert "unchecked" not in checked     # not declared, not checked


@pytest.mark.parametrize("params, message", [
    (dict(max_iter=0), "max_iter must be an integer in [1, 2147483647], got 0"),
    (dict(max_iter=True), "max_iter must be an integer"),
    (dict(rate=0.0), "rate must be one of 'auto' or a real number > 0, got 0.0"),
    (dict(rate="fast"), "rate must be one of 'auto' or a real number > 0, got 'fast'"),
    (dict(n_states=0), "n_states must be an integer in [1, 2147483647] or None, got 0"),
    (dict(shuffle=1), "shuffle must be True or False, got 1"),
    (dict(random_state=-1), "random_state must be None, a non-negative integer or a numpy Generator, got -1"),
    (dict(random_state=0.5), "random_state must be None"),
    (dict(grid=()), "grid must be a non-empty tuple, got ()"),
])
def test_each_bad_value_is_refused_naming_the_parameter(params, message):
    with pytest.raises(ValueError) as info:
        validate_params(_Estimator(**params))
    assert str(info.value).startswith(message)


def test_generators_pass_through_unchanged():
    rng = np.random.default_rng(0)
    assert validate_params(_Estimator(random_state=rng))["random_state"] is rng


def test_a_model_survives_cloning():
    from sklearn.base import clone

    from slr import StructuredLogisticRegression

    model = StructuredLogisticRegression()
    assert clone(model).get_params() == model.get_params()


def test_a_missing_optional_dependency_names_its_extra(monkeypatch):
    import sys

    from slr._optional import import_optional

    monkeypatch.setitem(sys.modules, "cvxpy", None)    # as if not installed
    with pytest.raises(ImportError, match=r'the exact LP needs cvxpy: pip install "slr\[exact\]"'):
        import_optional("cvxpy", "exact", "the exact LP")
    assert import_optional("numpy", "core", "anything") is np


def test_checked_and_n_jobs_constraints_use_their_checkers_messages():
    from slr.graph import check_epsilon

    constraints = {"epsilon": Checked(lambda v, name: check_epsilon(v, allow_zero=False, name=name), "eps"),
                   "n_jobs": NJobs()}
    good = validate_params(None, constraints, params={"epsilon": np.float32(0.5), "n_jobs": np.int64(-1)})
    assert good == {"epsilon": 0.5, "n_jobs": -1} and type(good["n_jobs"]) is int
    assert validate_params(None, constraints, params={"epsilon": 1, "n_jobs": None})["n_jobs"] is None
    for params, message in [({"epsilon": 1e-310, "n_jobs": 1}, "epsilon=1e-310 is subnormal"),
                            ({"epsilon": 0.1, "n_jobs": 0},
                             "n_jobs must be None, -1 (all cores) or an integer in [1, 2147483647], got 0"),
                            ({"epsilon": 0.1, "n_jobs": True}, "n_jobs must be None, -1"),
                            ({"epsilon": 0.1, "n_jobs": -2}, "n_jobs must be None, -1")]:
        with pytest.raises(ValueError) as info:
            validate_params(None, constraints, params=params)
        assert str(info.value).startswith(message)
