"""The partial-labels experiment's building blocks, by hand: hidden labels, labelled subgraphs, and
the report's count of the cells where latent learning wins."""
from __future__ import annotations

import numpy as np

from slr.suite import get_profile
from slr.suite.common import Logger
from slr.suite.partial_labels import NAME, TABLES, cells_of, hide_labels, labelled_subgraphs
from slr.suite.provenance import RunInfo, config_hash
from slr.suite.render_partial_labels import write_report


def test_hidden_labels_are_a_seeded_share_of_the_nodes():
    Y = [np.arange(5000) % 3]
    hidden = hide_labels(Y, 0.25)
    assert abs(np.mean(hidden[0] == -1) - 0.25) < 0.02
    kept = hidden[0] >= 0
    np.testing.assert_array_equal(hidden[0][kept], Y[0][kept])
    np.testing.assert_array_equal(hide_labels(Y, 0.25)[0], hidden[0])


def test_labelled_subgraphs_keep_the_labelled_nodes_and_the_edges_between_them():
    nodes = np.arange(10.0).reshape(5, 2)
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [0, 4]])
    on_edges = np.arange(5.0)[:, None]
    (X_sub,), (Y_sub,) = labelled_subgraphs([(nodes, edges, on_edges)], [np.array([1, -1, 0, 1, 1])])
    np.testing.assert_array_equal(X_sub[0], nodes[[0, 2, 3, 4]])
    np.testing.assert_array_equal(X_sub[1], [[1, 2], [2, 3], [0, 3]])   # 2-3, 3-4, 0-4 renumbered
    np.testing.assert_array_equal(X_sub[2], [[2.0], [3.0], [4.0]])
    np.testing.assert_array_equal(Y_sub, [1, 0, 1, 1])
    assert labelled_subgraphs([(nodes, edges, on_edges)], [np.full(5, -1)]) == ([], [])


def test_full_runs_once_per_data_set_and_the_others_per_share():
    spec = get_profile("quick").spec(NAME)
    cells = cells_of(spec)
    assert sum(m == "full" for _, _, m in cells) == 2
    assert len(cells) == 2 + 2 * 2 * len(spec.hidden)


def test_the_report_counts_where_latent_beats_drop(tmp_path):
    profile = get_profile("tiny")
    spec = profile.spec(NAME)
    info = RunInfo.collect("tiny", ["slr", "partial_labels", "--tiny"])
    rows = [dict(config=config_hash(spec.config()), dataset=d, hidden=h, method=m, test_error=e, labelled=1.0,
                 seconds=1.0, **info.row_fields())
            for d, h, m, e in [("letters", 0.0, "full", 0.2), ("letters", 0.5, "drop", 0.3),
                               ("letters", 0.5, "latent", 0.25), ("denoising", 0.0, "full", 0.1),
                               ("denoising", 0.5, "drop", 0.2), ("denoising", 0.5, "latent", 0.4)]]
    log = Logger(quiet=True)
    TABLES[0].open(tmp_path, log).upsert(rows)
    assert write_report(profile, tmp_path, info, log) == dict(cells=6, wins=1, shares=2)
    text = (tmp_path / "partial_labels.md").read_text()
    assert "| letters | 50% |  | 0.3000 | 0.2500 |" in text
