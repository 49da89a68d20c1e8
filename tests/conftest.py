"""Shared services for the whole test session, and the ``slow`` mark of the tests that start them.

One multi-node Ray cluster on this machine, one ``mlflow server``, and an empty MLflow SQLite
store that each test needing a store of its own gets a copy of.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.ray_head import SLOW_MACHINE

REPO = Path(__file__).resolve().parents[1]

# The commands read MLflow's MLFLOW_TRACKING_URI; a shell's must not send the tests' runs to
# its server. The tests that read it set it themselves.
os.environ.pop("MLFLOW_TRACKING_URI", None)

# Session services whose users are slow tests: each starts a Ray cluster or a server.
SLOW_FIXTURES = frozenset({"ray_cluster", "mlflow_server"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Marks every test that uses a slow session service as ``slow``; slow modules first.

    ``-m "not slow"`` then leaves out each test that starts Ray or ``mlflow server``,
    directly or through another fixture, whether or not its module marks it.

    The modules holding a slow test run first, each whole and in its own order: on two
    processes the quick modules fill in at the end, where otherwise one process could sit
    idle while the other runs a two-minute test.
    """
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    slow_modules = {item.module for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module not in slow_modules)


@pytest.fixture(scope="session")
def ray_cluster():
    """A head node (no CPUs) and two 1-CPU worker nodes, shared by every sweep test.

    Trials land on the worker nodes, so a sweep with two concurrent trials runs on two
    nodes. Stopped at the end of the session.
    """
    # Ray's socket paths must be short; the nodes and workers import tests.* modules.
    os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="vray-", dir="/tmp")
    os.environ.update(SLOW_MACHINE)  # each node's raylet may take long to register
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    )
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    # Each node compiles into its own inductor cache, as separate machines would: only the
    # sweep's storage path connects them.
    workers = [
        cluster.add_node(
            num_cpus=1,
            env_vars={"TORCHINDUCTOR_CACHE_DIR": os.path.join(os.environ["RAY_TMPDIR"], f"ind{i}")},
        )
        for i in range(2)
    ]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, logging_level="WARNING")
    yield cluster
    ray.shutdown()
    for node in workers:
        cluster.remove_node(node)
    cluster.shutdown()


@pytest.fixture(scope="session")
def _mlflow_sqlite_template(tmp_path_factory):
    """An empty MLflow SQLite store with its tables made, once per session.

    Making the tables of a new store takes MLflow seconds (its migrations); a copy of an
    empty store is the same store in milliseconds.
    """
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def mlflow_sqlite(_mlflow_sqlite_template, tmp_path):
    """The URI of a new, empty MLflow SQLite store at ``tmp_path/mlflow.db``.

    The path is the one ``default_tracking_uri(tmp_path)`` names, so a sweep run opened
    on ``tmp_path`` as its storage path uses this store.
    """
    path = tmp_path / "mlflow.db"
    shutil.copyfile(_mlflow_sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """A real ``mlflow server`` on 127.0.0.1 (SQLite backend, local artifacts), one per session."""
    from tests.mlflow_server import start_mlflow_server, stop_mlflow_server

    server, uri = start_mlflow_server(tmp_path_factory.mktemp("mlflow-server"))
    yield uri
    stop_mlflow_server(server)


@pytest.fixture
def postgres_bin() -> Path:
    """The bin directory of Debian's PostgreSQL: skipped without it, failed without it in CI."""
    from tests.postgres_server import postgres_bindir

    bindir = postgres_bindir()
    if bindir is None:
        message = "PostgreSQL (initdb) not found: apt-get install postgresql"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (.ci/run installs it)", pytrace=False)
        pytest.skip(message)
    return bindir
