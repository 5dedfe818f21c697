"""certificate_ against the exact LP and smoothed LP (cvxpy) and brute-force MAP on small graphs;
predict's warning when MAP decoding stops unconverged."""
from __future__ import annotations

import numpy as np
import pytest

from slr import StructuredLogisticRegression
from slr.datasets import make_denoising
from slr.inference import hmax
from slr.oracles import Constant, Linear


def _training_potentials(model, X, Y):
    """theta with the Hamming margin, per example, from the fitted functions."""
    L, eps = model.n_states_, model.epsilon_
    for (nodes, edges, on_edges), y in zip(X, Y):
        theta_nodes = eps * model.unary_.decision_function(nodes) + (np.arange(L)[None, :] != y[:, None])
        theta_edges = eps * model.pairwise_.decision_function(on_edges).reshape(-1, L, L)
        truth = theta_nodes[np.arange(len(y)), y].sum() + theta_edges[np.arange(len(edges)), y[edges[:, 0]],
                                                                      y[edges[:, 1]]].sum()
        yield theta_nodes, theta_edges, edges, truth


def test_loopy_certificate_brackets_the_exact_losses():
    from slr.inference.exact import brute_force_map, exact_lp, exact_smoothed

    X, Y = make_denoising(n_images=2, size=3, sigma=0.8, random_state=0)
    model = StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), epsilon=0.5, max_iter=4, n_jobs=1,
                                         random_state=0).fit(X, Y)
    cert = model.certificate_
    l0 = l1 = l_smoothed = entropy = 0.0
    for theta_nodes, theta_edges, edges, truth in _training_potentials(model, X, Y):
        l0 += brute_force_map(theta_nodes, theta_edges, edges)[0] - truth
        l1 += exact_lp(theta_nodes, theta_edges, edges).value - truth
        l_smoothed += exact_smoothed(theta_nodes, theta_edges, edges, 0.5).value - truth
        entropy += 0.5 * hmax(len(theta_nodes), len(edges), 2)
    assert cert.objective == pytest.approx(model.history_["objective"].iloc[-1])
    assert cert.lp_loss_lower <= l0 + 1e-9 and l1 <= cert.lp_loss_upper + 1e-6
    assert cert.objective >= l_smoothed - 1e-6            # R bounds the smoothed loss from above
    assert cert.entropy_bound == pytest.approx(entropy)
    assert cert.bounds_hold
    assert cert.last_sweeps >= 1 and cert.message_residual >= 0.0


def test_on_chains_the_lp_bounds_meet_at_the_exact_loss():
    rng = np.random.default_rng(0)
    X, Y = [], []
    for n in (4, 5, 3):
        X.append((rng.normal(size=(n, 3)), np.column_stack([np.arange(n - 1), np.arange(1, n)]), np.ones((n - 1, 1))))
        Y.append(rng.integers(3, size=n))
    model = StructuredLogisticRegression(Linear(l2=1.0), Constant(), max_iter=3, n_jobs=1).fit(X, Y)
    from slr.inference.exact import brute_force_map

    l0 = sum(brute_force_map(tn, te, e)[0] - truth for tn, te, e, truth in _training_potentials(model, X, Y))
    cert = model.certificate_
    assert cert.lp_loss_lower == pytest.approx(cert.lp_loss_upper) and cert.lp_loss_upper == pytest.approx(l0)
    assert cert.bounds_hold


def test_a_few_sweeps_leave_a_residual_and_an_unconverged_flag():
    X, Y = make_denoising(n_images=2, size=12, sigma=2.0, random_state=1)
    model = StructuredLogisticRegression(Linear(), Linear(), max_iter=2, max_sweeps=1, n_jobs=1).fit(X, Y)
    assert not model.certificate_.sweeps_converged and model.certificate_.message_residual > 1e-6
    assert model.certificate_.last_sweeps == 1


def test_predict_warns_when_map_decoding_stops_with_labels_still_moving():
    """One sweep of MAP decoding on small strongly coupled grids leaves labels that the next sweep
    changes (about 80% agree with the converged decoding): predict says so; with enough sweeps it
    is silent."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    X, Y = make_denoising(n_images=2, size=8, sigma=1.0, random_state=1)
    model = StructuredLogisticRegression(Linear(), Linear(), max_iter=5, n_jobs=1, predict_max_sweeps=1).fit(X, Y)
    with pytest.warns(ConvergenceWarning, match="labels were still changing or .* raise predict_max_sweeps"):
        hasty = np.concatenate(model.predict(X))
    model.set_params(predict_max_sweeps=2000).fit(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settled = np.concatenate(model.predict(X))
    assert (hasty != settled).any()
