"""Shared services for the whole test session: one multi-node Ray cluster on this machine."""

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def ray_cluster():
    """A head node (no CPUs) and two 1-CPU worker nodes, shared by every sweep test.

    Trials land on the worker nodes, so a sweep with two concurrent trials runs on two
    nodes. Stopped at the end of the session.
    """
    # Ray's socket paths must be short; the nodes and workers import tests.* modules.
    os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="vray-", dir="/tmp")
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
def mlflow_server(tmp_path_factory):
    """A real ``mlflow server`` on 127.0.0.1 (SQLite backend, local artifacts), one per session."""
    from tests.mlflow_server import start_mlflow_server, stop_mlflow_server

    server, uri = start_mlflow_server(tmp_path_factory.mktemp("mlflow-server"))
    yield uri
    stop_mlflow_server(server)
