"""The fit loop's data (:class:`slr._fit_data.FitData`) in partitions on Dask workers.

Each partition's examples, messages and potentials live on one worker as a
:class:`slr.distributed._shard.Shard` and never move; the parts of a half step that touch the data
are tasks on the shards:

- the oracle fit: Linear's (and Constant's) loss, gradient and Hessian blocks (or diagonal, for
  sparse or many features) are summed over the shards (:mod:`slr.distributed._oracles`); the
  coefficients go out, ``K x D`` sums come back; LightGBM trains through ``lightgbm.dask``
  (:mod:`slr.distributed._lightgbm`);
- the potentials: the fitted oracle (its parameters) goes out, each shard scores its rows;
- the sweeps: each shard sweeps its examples and reports two numbers;
- R: each shard returns its node and edge parts, which the client adds;
- with unlabelled nodes, the soft targets (:class:`slr.latent.LatentTargets`): each shard keeps
  and updates its examples' targets (the CCCP update is per example).

Shards are never changed in place, so a snapshot (early stopping) is the list of their futures.
"""
from __future__ import annotations

import math
import os
from contextlib import AbstractContextManager
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from slr.certificate import FitCertificate
from slr.distributed import _shard
from slr.distributed._backend import Backend
from slr.distributed._lightgbm import fit_lightgbm
from slr.distributed._oracles import fit_distributed
from slr.inference.batch import BatchSweepResult
from slr.models import PairwiseModel
from slr.oracles.base import OracleTags
from slr.oracles.lightgbm_adapter import LightGBM

__all__ = ["Layout", "ShardedData"]


class Layout:
    """What the client knows of the whole training set: sizes and widths, no rows."""

    def __init__(self, descriptions: Sequence[dict], n_states: int) -> None:
        self.n_states = n_states
        self.n_examples = sum(d["n_examples"] for d in descriptions)
        self.n_nodes = sum(d["n_nodes"] for d in descriptions)
        self.n_edges = sum(d["n_edges"] for d in descriptions)
        self.has_edges = any(d["has_edges"] for d in descriptions)
        self.all_chains = all(d["all_chains"] for d in descriptions)
        self.rows = {"unary": [d["n_nodes"] for d in descriptions], "pairwise": [d["n_edges"] for d in descriptions]}
        self.digest = tuple(d["digest"] for d in descriptions)
        self.d_node = descriptions[0]["d_node"]
        # as the single-process learner's check_dataset: the examples with edges settle the edge-feature
        # width, edge-free examples (here: partitions without edges) take it
        with_edges = [d for d in descriptions if d["has_edges"]] or descriptions[:1]
        self.d_edge = with_edges[0]["d_edge"]
        for name, described in (("d_node", descriptions), ("d_edge", with_edges)):
            widths = {d[name] for d in described}
            if len(widths) > 1:
                raise ValueError(f"the partitions of X have different feature widths ({name}: {sorted(widths)})")


class ShardedData:
    """The training set in shards on the workers, as the fit loop's data.

    Parameters
    ----------
    backend : Backend
    shards : list of futures of Shard
    layout : Layout
    epsilon : float
    n_jobs : int or None
        OpenMP threads of each shard's sweeps and R (resolved on its worker).
    timed : callable
    with_targets : bool
        Whether the shards carry soft targets (unlabelled nodes).
    checkpoint : (directory, every, rebuild) or None
        Every ``every`` iterations, each shard's messages go to ``directory`` and the shard is
        replaced by a task ``rebuild(index, path, oracles)`` that rebuilds it from its source and
        that file.
    """

    messages = None   # they live in the shards

    def __init__(self, backend: Backend, shards: list[Any], layout: Layout, epsilon: float, n_jobs: int | None,
                 timed: Callable[[str], AbstractContextManager], with_targets: bool,
                 checkpoint: tuple[str, int, Callable[..., Any]] | None = None) -> None:
        self.backend, self.shards, self.layout = backend, shards, layout
        self.epsilon, self.threads, self.timed = epsilon, n_jobs, timed
        self.has_edges, self.has_targets = layout.has_edges, with_targets
        self.checkpoint_every = checkpoint
        self.checkpoints: list[str] = []   # the files of the last checkpoint
        self.transfer: list[tuple[int, int, int, int]] = []

    def start(self, oracles: dict[str, Any], resume: tuple[list[Any] | None, bool] | None) -> None:
        if resume is None:
            return   # the shards start with zero functions and messages
        kept, fitted_pairwise = resume
        if kept is not None:   # the earlier fit's shards of the same examples: their messages
            self.shards = [self.backend.client.submit(_shard.with_messages_of, shard, old, pure=False)
                           for shard, old in zip(self.shards, kept)]
        self.shards = self.backend.map(_shard.with_potentials, self.shards, "unary", oracles["unary"], self.epsilon)
        if fitted_pairwise:
            self.shards = self.backend.map(_shard.with_potentials, self.shards, "pairwise", oracles["pairwise"],
                                           self.epsilon)

    def started(self) -> None:
        self.transfer.append((0, *self.backend.counters()))

    # ------------------------------------------------------------------ a half step's parts
    def fit(self, factor: str, oracle: Any, tags: OracleTags) -> None:
        width = self.layout.d_node if factor == "unary" else self.layout.d_edge
        n_classes = self.layout.n_states if factor == "unary" else self.layout.n_states ** 2
        with self.timed(f"{factor} fit"):
            if isinstance(oracle, LightGBM):
                fit_lightgbm(oracle, self.backend, self.shards, self.layout.rows[factor], factor, self.epsilon,
                             n_classes, width)
            else:   # a partition without edges has no pairwise problem to add
                with_rows = [shard for shard, n in zip(self.shards, self.layout.rows[factor]) if n]
                fit_distributed(oracle, self.backend, with_rows, factor, self.epsilon, n_classes, width)

    def unchecked_fit(self, oracle: Any) -> bool:
        # lightgbm.dask boosts without the adapter's check that a round lowers the loss
        return isinstance(oracle, LightGBM)

    def set_potentials(self, factor: str, oracle: Any, tags: OracleTags, exact: bool) -> None:
        with self.timed(f"{factor} potentials"):
            self.shards = self.backend.map(_shard.with_potentials, self.shards, factor, oracle, self.epsilon)

    def sweeps(self, n: int) -> BatchSweepResult:
        with self.timed("message passing"):
            self.shards = self.backend.map(_shard.swept, self.shards, n, self.epsilon, self.threads)
            summaries = self.backend.gather(self.backend.map(_shard.sweep_summary, self.shards))
        # per shard: the most sweeps of its examples, and whether all of them converged
        return BatchSweepResult(None, np.array([s[0] for s in summaries], dtype=np.int32),
                                np.array([s[1] for s in summaries]))

    def objective_parts(self, nodes: bool, edges: bool) -> tuple[float | None, float | None]:
        parts = self.backend.gather(self.backend.map(_shard.objective_parts, self.shards, self.epsilon,
                                                     self.threads, nodes, edges))
        return (math.fsum(part[0] for part in parts) if nodes else None,
                math.fsum(part[1] for part in parts) if edges else None)

    def update_targets(self) -> None:
        self.shards = self.backend.map(_shard.with_new_targets, self.shards, self.threads)

    # ------------------------------------------------------------------ early stopping, monitoring
    def snapshot(self) -> list[Any]:
        return list(self.shards)

    def restore(self, snapshot: list[Any]) -> None:
        self.shards = list(snapshot)

    def holds(self, data: Any) -> bool:
        return False   # the training data are on the workers; other data are decoded here

    def decode(self, predictor: PairwiseModel,
               messages: np.ndarray | None = None) -> np.ndarray:  # pragma: no cover - holds() is never true
        raise NotImplementedError("the training data are decoded on the workers (training_error)")

    def decodes_in_one_pass(self, predictor: PairwiseModel) -> bool:
        return True   # each shard decodes its own examples: the monitor measures every iteration

    def training_error(self, predictor: PairwiseModel) -> float:
        """Per-node error of MAP labels of the training set's labelled nodes under the current
        functions (NaN without any)."""
        counts = self.backend.gather(self.backend.map(_shard.errors, self.shards, predictor))
        labelled = sum(c[1] for c in counts)
        return sum(c[0] for c in counts) / labelled if labelled else float("nan")

    def iteration_done(self, iteration: int, oracles: dict[str, Any], fitted_pairwise: bool) -> None:
        """The traffic of the iteration, and every ``checkpoint_every`` iterations a checkpoint."""
        self.transfer.append((iteration, *self.backend.counters()))
        if self.checkpoint_every is not None and iteration % self.checkpoint_every[1] == 0:
            with self.timed("checkpoint"):
                self._checkpoint(iteration, (oracles["unary"], oracles["pairwise"] if fitted_pairwise else None))

    def _checkpoint(self, iteration: int, oracles: tuple[Any, Any | None]) -> None:
        """Write every shard's messages and replace the shards by tasks that rebuild them from their
        source and those files (each meant for the worker that holds the shard now), so that a lost
        shard is recomputed from its last checkpoint rather than from the start of the fit."""
        assert self.checkpoint_every is not None   # iteration_done checkpoints only with a setting
        directory, _, rebuild = self.checkpoint_every
        suffix = ".npz" if self.has_targets else ".npy"   # with soft targets, those too
        paths = [os.path.join(directory, f"iteration{iteration:05d}-partition{index:05d}{suffix}")
                 for index in range(len(self.shards))]
        saved = self.backend.gather([self.backend.client.submit(_shard.save_state, shard, path, pure=False)
                                     for shard, path in zip(self.shards, paths)])
        self.shards = [rebuild(index, path, self.shards[index], oracles) for index, path in enumerate(saved)]
        # no task reads the previous checkpoint any more
        self.backend.gather([self.backend.client.submit(os.remove, path, pure=False) for path in self.checkpoints])
        self.checkpoints = saved

    def certificate(self, objective: float, last_sweep: BatchSweepResult | None, stop_reason: str,
                    n_iter: int) -> FitCertificate | None:
        """No certificate: its bounds need every example's messages in one place."""
        return None

    def fitted_attributes(self) -> dict[str, Any]:
        # the messages a continued fit takes up are the shards' (futures; the learner does not pickle them)
        return {"transfer_": _transfer_frame(self.transfer), "n_partitions_": len(self.shards),
                "_train_messages": list(self.shards)}


def _transfer_frame(counters: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    """Per iteration the traffic since the previous row."""
    frame = pd.DataFrame(counters, columns=["iteration", "bytes_sent", "bytes_received", "tasks"])
    frame[["bytes_sent", "bytes_received", "tasks"]] = frame[["bytes_sent", "bytes_received", "tasks"]].diff().fillna(
        frame[["bytes_sent", "bytes_received", "tasks"]]).astype(np.int64)
    return frame
