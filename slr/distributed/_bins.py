"""One set of histogram bins for every worker of a ``lightgbm.dask`` training: the bins the
single-process adapter's LightGBM would find on all the rows.

Distributed LightGBM finds each feature's bin boundaries on the rows of one machine (the one it
assigns that feature to) and shares them; which machine varies from run to run, so the trees
depend on where the rows happen to be. Here the client finds the boundaries instead and forces
them on every worker:

1. each shard sends, per feature column, runs of its sorted values (first value, last value, row
   count): one run per distinct value where it has at most ``max(SUMMARY_POINTS, 4 max_bin)``
   of them, otherwise that many runs of about equal row counts (a value's rows are never split),
   so the traffic does not grow with the rows (3 numbers per run);
2. the client spreads each run's count evenly from its first to its last value, scaled down to
   ``bin_construct_sample_cnt`` values where there are more rows (LightGBM samples as many), and
   hands this sample of one column at a time to LightGBM itself, reading back which of its
   distinct values share a bin (``Dataset._dump_text``: LightGBM has no other reader of its bins);
3. the boundaries between bins (LightGBM's: the midpoint of the neighbouring values rounded up
   by one ulp; the zero bounds ``+-1e-35`` LightGBM adds itself) go to every worker as
   ``forcedbins_filename``, and ``max_bin_by_feature`` allows each feature exactly these bins, so
   that the worker that bins a feature adds no boundaries of its own.

Where every shard holds at most that many distinct values of a feature and there are at most
``bin_construct_sample_cnt`` rows, step 2 sees the very values the adapter's LightGBM sees, and
the bins are the adapter's. Otherwise each boundary lies within about a run of a shard of the
adapter's, in rank (2 shards of 20,000 normal values: at most 9 rows off, bins of 159 rows). The
zero bounds are those of the rows of the worker that bins the feature: a feature of both signs
needs rows of both signs on every worker to keep them.

Equal bins do not make the data-parallel trees the adapter's: LightGBM's data-parallel learner
takes a leaf's row count from the Hessian sums of its parent's split (the serial learner counts
the rows), so ``min_data_in_leaf`` admits other splits where the Hessians vary.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import uuid
from typing import Any, Iterator, Sequence

import numpy as np
import scipy.sparse as sp

from slr._features import FeatureMatrix, is_sparse
from slr._optional import import_optional
from slr.distributed import _shard
from slr.distributed._backend import Backend

__all__ = ["SUMMARY_POINTS", "find_bins", "forced_bins"]

#: Fewest runs a shard sends per feature column (at least 4 ``max_bin`` are sent)
SUMMARY_POINTS = 1024

#: LightGBM's ``kZeroThreshold``: it puts the bin bounds at +-this itself
ZERO_THRESHOLD = 1e-35

#: LightGBM's default ``bin_construct_sample_cnt``
SAMPLE_COUNT = 200000


Summary = tuple[np.ndarray, np.ndarray, np.ndarray]


def _value_counts(features: FeatureMatrix) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per column, its distinct values (sorted) and their row counts; a sparse column's from its
    stored entries and the number of rows it leaves zero (no dense column is made)."""
    if not is_sparse(features):
        for column in np.asarray(features, dtype=np.float64).T:
            yield np.unique(column, return_counts=True)
        return
    n = features.shape[0]
    columns = sp.csc_array(features)
    for start, stop in zip(columns.indptr[:-1], columns.indptr[1:]):
        values, counts = np.unique(columns.data[start:stop], return_counts=True)
        zeros = n - (stop - start)
        if zeros:
            at = np.searchsorted(values, 0.0)
            if at < values.size and values[at] == 0.0:   # stored zeros
                counts[at] += zeros
            else:
                values, counts = np.insert(values, at, 0.0), np.insert(counts, at, zeros)
        yield values, counts


def column_summaries(features: FeatureMatrix, n_points: int) -> list[Summary]:
    """Per column of ``features`` (dense or sparse), runs of its sorted values: their first and
    last values and row counts. A run is one distinct value where the column has at most
    ``n_points`` of them; otherwise the column is cut into ``n_points`` runs of about equal counts
    (a value's rows are never split)."""
    summaries = []
    for values, counts in _value_counts(features):
        firsts = lasts = values
        if values.size > n_points:
            totals = np.cumsum(counts)
            ends = np.unique(np.searchsorted(totals, np.ceil(np.arange(1, n_points + 1) * (totals[-1] / n_points))))
            firsts, lasts = values[np.r_[0, ends[:-1] + 1]], values[ends]
            counts = np.diff(totals[ends], prepend=0)
        summaries.append((firsts, lasts, counts.astype(np.int64)))
    return summaries


def _shard_summaries(shard: _shard.Shard, factor: str, n_points: int) -> list[Summary]:
    data = shard.data
    return column_summaries(data.node_features if factor == "unary" else data.edge_features, n_points)


def merged_sample(parts: Sequence[Summary], limit: int) -> np.ndarray:
    """A sorted sample of one column from its shards' summaries: each run's count of values spread
    evenly from its first to its last value (a run of one value: that value, as often as it
    occurs), the counts scaled down to about ``limit`` values in all where there are more."""
    firsts, lasts, counts = (np.concatenate(arrays) for arrays in zip(*parts))
    total = int(counts.sum())
    if total > limit:
        counts = np.round(counts * (limit / total)).astype(np.int64)
    run = np.repeat(np.arange(counts.size), counts)
    position = np.arange(run.size) - np.repeat(np.cumsum(counts) - counts, counts)
    fraction = position / np.maximum(counts - 1, 1)[run]
    return np.sort(firsts[run] + (lasts - firsts)[run] * fraction)


def column_bounds(sample: np.ndarray, params: dict) -> list[float]:
    """The upper bounds LightGBM (with ``params``) finds on ``sample`` (one column), except the zero
    bounds and the last (infinite) one, which it adds itself."""
    values = np.unique(sample)
    if values.size < 2:
        return []
    lightgbm = import_optional("lightgbm", "lightgbm", "the distributed LightGBM oracle")
    binning = {name: value for name, value in params.items() if name not in ("num_class", "metric", "objective")}
    binning.update(feature_pre_filter=False, num_threads=1, verbosity=-1)
    reference = lightgbm.Dataset(sample[:, None], params=binning, free_raw_data=True).construct()
    bins = _bin_indices(lightgbm.Dataset(values[:, None], reference=reference, params=binning).construct())
    bounds = []
    for low, high, b_low, b_high in zip(values[:-1], values[1:], bins[:-1], bins[1:]):
        zero_bound = low <= -ZERO_THRESHOLD < high or low <= ZERO_THRESHOLD < high
        if b_low != b_high and not zero_bound:
            bounds.append(float(np.nextafter((low + high) / 2.0, np.inf)))
    return bounds


def _bin_indices(dataset: Any) -> np.ndarray:
    """The bin of every row of a one-column LightGBM Dataset (from its text dump: LightGBM has no
    other reader of its bins); -1 for a column it left out."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "bins.txt")
        dataset._dump_text(path)
        with open(path) as file:
            lines = file.read().splitlines()
    rows = lines[len(lines) - dataset.num_data():]
    return np.array([-1 if row.strip(", ") == "NA" else int(row.strip(", ")) for row in rows])


def zero_bounds(sample: np.ndarray) -> int:
    """How many of the zero bounds LightGBM adds to a column of sorted ``sample``."""
    return int(sample.size > 0 and sample[0] <= -ZERO_THRESHOLD) + int(sample.size > 0 and sample[-1] > ZERO_THRESHOLD)


def find_bins(backend: Backend, shards: Sequence[Any], factor: str, n_features: int,
              params: dict) -> list[tuple[list[float], int]]:
    """Per feature of ``factor``'s rows on the shards, the bin bounds to force (module docstring)
    and how many zero bounds LightGBM adds."""
    n_points = max(SUMMARY_POINTS, 4 * int(params.get("max_bin", 255)))
    summaries = backend.gather(backend.map(_shard_summaries, shards, factor, n_points))
    limit = int(params.get("bin_construct_sample_cnt", SAMPLE_COUNT))
    bins = []
    for j in range(n_features):
        sample = merged_sample([summary[j] for summary in summaries], limit)
        bins.append((column_bounds(sample, params), zero_bounds(sample)))
    return bins


@contextlib.contextmanager
def forced_bins(client: Any, bins: Sequence[tuple[list[float], int]] | None) -> Iterator[dict]:
    """The LightGBM parameters that force ``bins`` (from :func:`find_bins`; None: none) on every
    worker, while their file exists on every worker."""
    if bins is None:
        yield {}
        return
    text = json.dumps([{"feature": j, "bin_upper_bound": bounds} for j, (bounds, _) in enumerate(bins) if bounds])
    name = f"slr-lightgbm-bins-{uuid.uuid4().hex}.json"
    directories = set(client.run(tempfile.gettempdir).values())
    path = os.path.join(directories.pop(), name) if len(directories) == 1 else name
    client.run(_write, path, text)
    try:
        yield {"forcedbins_filename": path,
               "max_bin_by_feature": [max(len(bounds) + zeros + 1, 2) for bounds, zeros in bins]}
    finally:
        client.run(_remove, path)


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
