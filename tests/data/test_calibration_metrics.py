"""Calibration metrics of node marginals (slr.metrics) against scikit-learn and by hand."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import log_loss

from slr.metrics import (calibration_curve, expected_calibration_error, node_brier_score, node_log_loss)


def _examples(rng, sizes, L):
    marginals = [rng.dirichlet(np.ones(L), size=n) for n in sizes]
    labels = [rng.integers(L, size=n) for n in sizes]
    return labels, marginals


def test_log_loss_and_brier_are_those_of_all_nodes_pooled():
    rng = np.random.default_rng(0)
    Y, P = _examples(rng, [3, 5, 1], 4)
    truth, probabilities = np.concatenate(Y), np.concatenate(P)
    assert node_log_loss(Y, P) == pytest.approx(log_loss(truth, probabilities, labels=range(4)), rel=1e-12)
    onehot = np.eye(4)[truth]
    assert node_brier_score(Y, P) == pytest.approx(np.mean(np.sum((probabilities - onehot) ** 2, axis=1)), rel=1e-12)


def test_expected_calibration_error_by_hand():
    """Four nodes, two bins: confidences .6 (right), .7 (wrong) in the first, .9 (right) twice in the second."""
    P = [np.array([[0.6, 0.4], [0.3, 0.7]]), np.array([[0.9, 0.1], [0.1, 0.9]])]
    Y = [np.array([0, 0]), np.array([0, 1])]
    curve = calibration_curve(Y, P, n_bins=2)
    np.testing.assert_array_equal(curve.count, [0, 4])   # every confidence is >= .5: all in the upper bin
    curve = calibration_curve(Y, P, n_bins=4)            # bins [.5, .75) and [.75, 1]
    np.testing.assert_array_equal(curve.count, [0, 0, 2, 2])
    np.testing.assert_allclose(curve.confidence[2:], [0.65, 0.9])
    np.testing.assert_allclose(curve.accuracy[2:], [0.5, 1.0])
    assert expected_calibration_error(Y, P, n_bins=4) == pytest.approx(0.5 * 0.15 + 0.5 * 0.1)


def test_a_calibrated_forecaster_has_a_small_error():
    rng = np.random.default_rng(1)
    P = [rng.dirichlet(np.ones(3), size=20000)]
    Y = [np.array([rng.choice(3, p=p) for p in P[0]])]   # labels drawn from the marginals themselves
    assert expected_calibration_error(Y, P) < 0.02
    sharpened = [np.eye(3)[P[0].argmax(axis=1)] * 0.97 + 0.01]   # overconfident
    assert expected_calibration_error(Y, sharpened) > 0.2


def test_bad_input_is_refused():
    Y, P = [np.array([0, 1])], [np.array([[0.5, 0.5], [0.2, 0.8]])]
    with pytest.raises(ValueError, match="as many examples"):
        node_log_loss(Y, P + P)
    with pytest.raises(ValueError, match="sum to 1"):
        node_log_loss(Y, [np.array([[0.5, 0.6], [0.2, 0.8]])])
    with pytest.raises(ValueError, match="labels outside"):
        node_brier_score([np.array([0, 2])], P)
    with pytest.raises(ValueError, match="n_bins"):
        expected_calibration_error(Y, P, n_bins=0)
    with pytest.raises(ValueError, match="finite"):
        calibration_curve(Y, [np.array([[np.nan, 0.5], [0.2, 0.8]])])
