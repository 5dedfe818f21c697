"""The data of pystruct 0.3.2's own test suite, made by pystruct; runs INSIDE the peer env.

Executed by the peer environment's CPython 3.6 (``python suite_data.py OUT.npz``), so it is
Python 3.6 code that imports only numpy, scipy, scikit-learn and pystruct. Every array is made as
pystruct's tests make it: pystruct's ``pystruct.datasets`` generators with the tests' arguments and
seeds, scikit-learn 0.22's ``make_blobs`` and splits, and the random potentials of the inference
tests drawn in the tests' order from the tests' ``RandomState``. Generators the tests call without a
seed (``generate_checker_multinomial``, ``generate_blocks_multinomial(seed=None)``, the 1-d data
sets) draw from numpy's global state, which in pystruct's run depends on the tests run before; here
the global state is seeded with 0 just before such a call, so the data are fixed.

The output is one ``.npz`` (no pickles): key ``"<name>/<field>"`` for each data set's arrays, as
the slr side (:func:`slr.baselines.peer.client.pystruct_suite_data`) reads them back.
"""
import sys

import numpy as np


def _grids(out, name, X, Y):
    out[name + "/X"] = np.asarray(X, dtype=np.float64)
    out[name + "/Y"] = np.asarray(Y, dtype=np.int64)


def _generators(out):
    from pystruct import datasets as ds

    _grids(out, "blocks1", *ds.generate_blocks(n_samples=1))
    _grids(out, "blocks1_noise1", *ds.generate_blocks(n_samples=1, noise=1))
    _grids(out, "blocks3", *ds.generate_blocks(n_samples=3))
    _grids(out, "blocks5", *ds.generate_blocks(n_samples=5))
    _grids(out, "blocks10", *ds.generate_blocks(n_samples=10))
    _grids(out, "checker", *ds.generate_checker())
    # the unary tests: one sample of every binary generator, noisy and noise-free
    for gen in (ds.generate_blocks, ds.generate_checker, ds.generate_big_checker,
                ds.generate_easy):
        _grids(out, "unary_" + gen.__name__, *gen(n_samples=1))
        _grids(out, "unary_" + gen.__name__ + "_clean", *gen(n_samples=1, noise=0))
    for gen in (ds.generate_blocks_multinomial, ds.generate_checker_multinomial):
        np.random.seed(0)
        _grids(out, "unary_" + gen.__name__, *gen(n_samples=1, size_x=9))
        np.random.seed(0)
        _grids(out, "unary_" + gen.__name__ + "_clean", *gen(n_samples=1, noise=0))
    multinomial = {
        "bm40_noise.5_seed0": dict(n_samples=40, noise=0.5, seed=0),
        "bm10_noise.3_seed0": dict(n_samples=10, noise=0.3, seed=0),
        "bm10_noise.5_seed0": dict(n_samples=10, noise=0.5, seed=0),
        "bm10_noise.5_seed0_size9": dict(n_samples=10, noise=0.5, seed=0, size_x=9),
        "bm10_noise.6_seed1": dict(n_samples=10, noise=0.6, seed=1),
        "bm10_noise1.5_seed0": dict(n_samples=10, noise=1.5, seed=0),
        "bm15_noise3_seed0": dict(n_samples=15, noise=3, seed=0),
        "bm1_seed0_size9": dict(n_samples=1, size_x=9, seed=0),
        "bm1_noise2_seed1": dict(n_samples=1, noise=2, seed=1),
    }
    for name, kwargs in sorted(multinomial.items()):
        _grids(out, name, *ds.generate_blocks_multinomial(**kwargs))
    np.random.seed(0)
    _grids(out, "bm1_unseeded", *ds.generate_blocks_multinomial(n_samples=1))
    np.random.seed(0)
    _grids(out, "cm10_noise.1", *ds.generate_checker_multinomial(n_samples=10, noise=0.1))
    np.random.seed(0)
    _grids(out, "cm10_noise.4", *ds.generate_checker_multinomial(n_samples=10, noise=0.4))
    for name, kwargs in (("simple2x2_40", dict(seed=1, n_samples=40)),
                         ("simple2x2_20", dict(seed=1)),
                         ("simple2x2_20_flips6", dict(seed=1, n_samples=20, n_flips=6))):
        _grids(out, name, *ds.make_simple_2x2(**kwargs))


def _sklearn(out):
    from sklearn.datasets import load_digits, load_iris, make_blobs
    from sklearn.model_selection import train_test_split

    iris = load_iris()
    train, test = train_test_split(np.arange(len(iris.target)), random_state=1)
    out["iris/X"], out["iris/y"] = iris.data, iris.target
    out["iris/train"], out["iris/test"] = train, test
    digits = load_digits()
    out["digits/X"], out["digits/y"] = digits.data, digits.target
    for name, kwargs in (("blobs2_rs1", dict(n_samples=80, centers=2, random_state=1)),
                         ("blobs3_rs42", dict(n_samples=80, centers=3, random_state=42)),
                         ("blobs3_rs1_std3", dict(n_samples=210, centers=3, random_state=1,
                                                  cluster_std=3, shuffle=False))):
        X, y = make_blobs(**kwargs)
        out[name + "/X"], out[name + "/y"] = X, y
    np.random.seed(0)
    out["uniform30/X"] = np.random.uniform(size=(30, 1))


def _random_potentials(out):
    from scipy import sparse
    from scipy.sparse.csgraph import minimum_spanning_tree

    # test_binary_crf_exhaustive: 3 x 2 grids, x = (-u, 0), w uniform
    np.random.seed(0)
    xs, ws = [], []
    for _ in range(10):
        x = np.random.uniform(-1, 1, size=(3, 2))
        xs.append(np.dstack([-x, np.zeros_like(x)]))
        ws.append(np.random.uniform(-1, 1, size=7))
    out["exhaustive/X"], out["exhaustive/w"] = np.array(xs), np.array(ws)
    # test_binary_crf_exhaustive_loss_augmented (the draws of its first inference method)
    np.random.seed(0)
    xs, ys, ws = [], [], []
    for _ in range(10):
        ys.append(np.random.randint(2, size=(3, 2)))
        x = np.random.uniform(-1, 1, size=(3, 2))
        xs.append(np.dstack([-x, np.zeros_like(x)]))
        ws.append(np.random.uniform(-1, 1, size=7))
    out["exhaustive_la/X"], out["exhaustive_la/w"] = np.array(xs), np.array(ws)
    out["exhaustive_la/Y"] = np.array(ys)
    # test_exact_inference.test_chain: 10 nodes, 3 states, one shared pairwise table
    rnd = np.random.RandomState(0)
    unary, pair = [], []
    for _ in range(10):
        unary.append(rnd.normal(size=(10, 3)))
        pair.append(rnd.normal(size=(3, 3)))
    out["chain_shared/unary"], out["chain_shared/pairwise"] = np.array(unary), np.array(pair)
    # test_maxprod.test_tree_max_product_chain: a table per edge
    rnd = np.random.RandomState(0)
    unary, pair = [], []
    for _ in range(10):
        unary.append(rnd.normal(size=(10, 3)))
        pair.append(rnd.normal(size=(9, 3, 3)))
    out["chain_edges/unary"], out["chain_edges/pairwise"] = np.array(unary), np.array(pair)
    # test_maxprod.test_tree_max_product_tree: minimum spanning trees of random complete graphs
    rnd = np.random.RandomState(0)
    edges, unary, pair = [], [], []
    for _ in range(100):
        graph = rnd.uniform(size=(10, 10))
        tree = minimum_spanning_tree(sparse.csr_matrix(graph))
        edges.append(np.c_[tree.nonzero()])
        unary.append(rnd.normal(size=(10, 3)))
        pair.append(rnd.normal(size=(9, 3, 3)))
    out["trees/edges"], out["trees/unary"] = np.array(edges), np.array(unary)
    out["trees/pairwise"] = np.array(pair)
    # test_edge_feature_graph_crf.test_energy_discrete (unseeded there)
    np.random.seed(0)
    xs, ws = [], []
    for _ in range(10):
        xs.append(np.random.normal(size=(7, 8, 3)))
        ws.append(np.hstack([np.random.normal(size=(3, 3)).ravel() for _ in range(3)]))
    out["energy_discrete/X"], out["energy_discrete/w"] = np.array(xs), np.array(ws)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: python suite_data.py OUT.npz\n")
        return 2
    import warnings
    warnings.simplefilter("ignore")
    out = {}
    _generators(out)
    _sklearn(out)
    _random_potentials(out)
    tmp = argv[1] + ".tmp.npz"
    np.savez_compressed(tmp, **out)
    import os
    os.rename(tmp, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
