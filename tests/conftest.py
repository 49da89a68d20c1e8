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
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
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
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    root = tmp_path_factory.mktemp("mlflow-server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    server = subprocess.Popen(
        [
            sys.executable, "-m", "mlflow", "server",
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination", str(root / "artifacts"),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(root / "server.log").open("w"),
        start_new_session=True,
    )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2):
                break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(
                    f"mlflow server did not start: {(root / 'server.log').read_text()}"
                ) from None
            time.sleep(0.5)
    yield uri
    os.killpg(server.pid, 15)
    server.wait(timeout=20)
