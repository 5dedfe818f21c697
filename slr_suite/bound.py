"""Theorem 1.1 on random small graphs: ``l0 <= l1 <= l <= l1 + eps * Hmax`` against exact solvers.

For a graph with potentials ``F`` and a true labelling ``y``, ``theta_F = F + Delta`` with the
Hamming loss on nodes (``Delta_i(y_i, a) = [a != y_i]``, ``Delta_e = 0``):

- ``l0 = max_y' theta_F(y') - F(y)``  (brute-force MAP),
- ``l1 = max_{mu in local polytope} theta_F . mu - F(y)``  (LP, HiGHS),
- ``l  = A(theta_F) - F(y)`` with the entropy-smoothed ``A``  (Clarabel), and ``l_mp`` the same
  from slr's star-update message passing,
- ``upper = l1 + eps * Hmax``, ``Hmax = n log L + m log L^2``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from slr.suite.common import RunContext
from slr.suite.experiment import Cell, ExperimentBase, Table
from slr.suite.provenance import PROVENANCE_COLUMNS, RunInfo, config_hash
from slr.suite.store import CellRecord, RecordSpec

__all__ = ["Bound", "BoundSpec", "NAME", "SPECS", "TABLES", "random_problem", "cell", "COLUMNS", "TOL", "SEED"]

COLUMNS = ["config", "graph", "kind", "n", "m", "L", "eps", "l0", "l1", "l", "l_mp", "eps_hmax", "upper",
           "l0_le_l1", "l1_le_l", "l_le_upper", "holds", "tree_tight", *PROVENANCE_COLUMNS]
TOL = 1e-6
SEED = 1000   # graph g draws its potentials from default_rng(SEED + g)
#: What a cached cell holds (a stored entry that does not fit is set aside and recomputed).
RECORD = RecordSpec(row={c: (str,) if c in ("config", "kind", "commit", "code", "command", "machine", "computed_at")
                         else (int,) if c in ("graph", "n", "m", "L") else (bool, str) if c == "tree_tight"
                         else (bool,) if c in ("l0_le_l1", "l1_le_l", "l_le_upper", "holds", "dirty")
                         else (int, float) for c in COLUMNS})


@dataclass(frozen=True)
class BoundSpec:
    """The random graphs of one profile: ``n_graphs`` of at most ``max_nodes`` nodes (cycles and
    grids round it), with label counts cycling through ``states``, each checked at every eps of ``epsilons``."""

    n_graphs: int
    max_nodes: int
    states: tuple[int, ...]
    epsilons: tuple[float, ...]

    def config(self) -> dict[str, Any]:
        """Every setting, as the ``config`` column hashes it."""
        return asdict(self)


#: The graphs of each profile.
SPECS = {
    "tiny": BoundSpec(n_graphs=3, max_nodes=4, states=(2, 3), epsilons=(0.1, 1.0)),
    "quick": BoundSpec(n_graphs=12, max_nodes=6, states=(2, 3), epsilons=(0.03, 0.1, 0.3, 1.0)),
    "full": BoundSpec(n_graphs=50, max_nodes=8, states=(2, 3, 4), epsilons=(0.03, 0.1, 0.3, 1.0)),
}


def random_problem(index: int, max_nodes: int, states: tuple[int, ...]):
    """Graph number ``index``: a tree, a binary odd cycle or a small grid, with random potentials.

    Returns
    -------
    kind : str
    edges : ndarray (m, 2)
    theta_nodes : ndarray (n, L)     ``F``'s node potentials
    theta_edges : ndarray (m, L, L)  ``F``'s edge potentials
    y : ndarray (n,)                 the "true" labelling
    """
    rng = np.random.default_rng(SEED + index)
    L = int(states[index % len(states)])
    kind = ("tree", "cycle", "grid")[index % 3]
    n = int(rng.integers(3, max(3, max_nodes) + 1))
    if kind == "tree":
        edges = [(int(rng.integers(0, i)), i) for i in range(1, n)]
    elif kind == "cycle":
        n += 1 - n % 2      # binary odd cycles with repulsive couplings are frustrated: LP loose
        L = 2
        edges = [(i, i + 1) for i in range(n - 1)] + [(n - 1, 0)]
    else:
        h = 2
        w = max(2, n // 2)
        n = h * w
        edges = [(r * w + c, r * w + c + 1) for r in range(h) for c in range(w - 1)]
        edges += [(c, w + c) for c in range(w)]
    edges = np.asarray(edges, dtype=np.int64)
    theta_nodes = rng.normal(0.0, 1.0, size=(n, L))
    theta_edges = rng.normal(0.0, 2.0, size=(edges.shape[0], L, L))
    if kind == "cycle":     # a strong repulsive Potts coupling (neighbours want to differ)
        theta_edges = 3.0 * (1.0 - np.eye(L)) + rng.normal(0.0, 0.3, size=theta_edges.shape)
    y = rng.integers(0, L, size=n)
    return kind, edges, theta_nodes, theta_edges, y


def _score(theta_nodes, theta_edges, edges, y) -> float:
    return float(theta_nodes[np.arange(len(y)), y].sum()
                 + theta_edges[np.arange(len(edges)), y[edges[:, 0]], y[edges[:, 1]]].sum())


def cell(spec: BoundSpec, g: int, eps: float) -> Cell:
    """Graph ``g`` at ``eps``; its key holds what draws the graph (the profile's ``max_nodes`` and ``states``)."""
    return Cell(label=f"{g}:{eps}", identity=dict(graph=g, eps=eps),
                config=dict(max_nodes=spec.max_nodes, states=spec.states), seed=SEED, args=(g, eps),
                group=f"graph {g}")


def _compute_graph(spec: BoundSpec, g: int, epsilons: list[float], info: RunInfo) -> list[CellRecord]:
    """Every eps of graph ``g``: the exact LP, smoothed LP and MAP against message passing."""
    from slr.inference import smoothed_lp
    from slr.inference.exact import brute_force_map, exact_lp, exact_smoothed, hmax

    kind, edges, tn, te, y = random_problem(g, spec.max_nodes, tuple(spec.states))
    n, L = tn.shape
    m = edges.shape[0]
    theta_n = tn + (np.arange(L)[None, :] != y[:, None])   # + Hamming Delta on nodes
    f_y = _score(tn, te, edges, y)
    l0 = brute_force_map(theta_n, te, edges)[0] - f_y
    l1 = exact_lp(theta_n, te, edges).value - f_y
    hm = hmax(n, m, L)
    records = []
    for eps in epsilons:
        l_val = exact_smoothed(theta_n, te, edges, eps).value - f_y
        l_mp = smoothed_lp(theta_n, te, edges, eps, max_sweeps=5000, tol=1e-10).value - f_y
        upper = l1 + eps * hm
        row = dict(config=config_hash(spec.config()), graph=g, kind=kind, n=n, m=m, L=L, eps=eps, l0=l0, l1=l1,
                   l=l_val, l_mp=l_mp, eps_hmax=eps * hm, upper=upper,
                   l0_le_l1=bool(l0 <= l1 + TOL), l1_le_l=bool(l1 <= l_val + TOL),
                   l_le_upper=bool(l_val <= upper + TOL),
                   tree_tight=(bool(abs(l0 - l1) <= TOL) if kind == "tree" else ""), **info.row_fields())
        row["holds"] = bool(row["l0_le_l1"] and row["l1_le_l"] and row["l_le_upper"])
        records.append(CellRecord(row=row))
    return records


NAME = "bound"
TABLES = (Table("bound_results.csv", COLUMNS, ("config", "graph", "eps")),)


class Bound(ExperimentBase):
    """Theorem 1.1 as an :class:`slr.suite.experiment.Experiment`: a cell is one (graph, eps);
    the eps values of one graph are computed by one task."""

    name = NAME
    record = RECORD
    help = "check Theorem 1.1 on random small graphs against exact solvers"
    specs = SPECS
    tables = TABLES

    def cells(self, profile, selection, done, ctx: RunContext) -> list[Cell]:
        spec = self.spec(profile)
        return [cell(spec, g, float(eps)) for g in range(spec.n_graphs) for eps in spec.epsilons]

    def compute(self, spec: BoundSpec, cells: Sequence[Cell], info: RunInfo, *,
                n_threads: int | None) -> list[CellRecord]:
        (g,) = {c.args[0] for c in cells}
        return _compute_graph(spec, g, [c.args[1] for c in cells], info)

    def describe(self, record: CellRecord) -> str:
        row = record.row
        return (f"graph {row['graph']} ({row['kind']}, n={row['n']}, m={row['m']}, L={row['L']}) "
                f"eps={row['eps']}: l0={row['l0']:.4f} l1={row['l1']:.4f} l={row['l']:.4f} <= "
                f"{row['upper']:.4f} {'ok' if row['holds'] else 'VIOLATED'}")
