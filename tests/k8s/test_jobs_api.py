"""The RayJob path for real: a sweep submitted through a Ray head's job server.

KubeRay runs a RayJob by starting a Ray head with its dashboard and job server, then calling
``ray job submit --address http://<head>:8265 -- <entrypoint>``. This test makes that call
to a real local head (``ray start --head`` with ``ray[default]``), on loopback, with the
entrypoint of ``k8s/overlays/cpu`` pointed at local storage and a real MLflow server, waits
for the job to succeed and finds the sweep's runs in MLflow.

The quickstart is cut from 16 trials of 3 epochs to 4 of 1 epoch (``--set``): the full one
takes minutes on a shared 2-core machine, and the Jobs API path is the same either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.k8s.test_manifests import entrypoint_args, rendered, the
from tests.mlflow_server import start_mlflow_server, stop_mlflow_server
from tests.ray_head import RAY, start_ray_head, stop_ray_head

pytestmark = pytest.mark.slow  # a Ray head with its job server, and mlflow server

REPO = Path(__file__).resolve().parents[2]
SMALLER = [
    "--set",
    "space.precision=[32, bf16-mixed]",
    "--set",
    "space.compile_mode=[none]",
    "--set",
    "trainer.max_epochs=1",
]
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def head_environment() -> dict[str, str]:
    """The head's environment, and so the job's: the image's, as far as it matters here."""
    return {
        **os.environ,
        # The image installs versatil; here the checkout stands in for it.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        # The entrypoint's `python` is this environment's, as in the image.
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        # Ray binds a node to a non-loopback address on Linux unless this says otherwise
        # (ray._private.services.get_node_ip_address): keep every socket on 127.0.0.1.
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        # As in the pods: no Ray token (a developer's ~/.ray/auth_token would turn it on).
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }


def job_status(dashboard: str, submission_id: str) -> dict:
    """The job's record from the job server's REST API, which ``ray job status`` reads.

    Polled over HTTP: one CLI call costs seconds of interpreter start on a busy machine.
    """
    with urllib.request.urlopen(f"{dashboard}/api/jobs/{submission_id}", timeout=30) as answer:
        return json.load(answer)


def ray_job(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    """Runs ``ray job ARGS`` and returns its output; fails on a non-zero exit."""
    result = subprocess.run(
        [*RAY, "job", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_quickstart_submitted_through_the_job_server_logs_its_trials_to_mlflow(tmp_path):
    job = the(rendered("overlays/cpu"), "RayJob")
    args = entrypoint_args(job["spec"]["entrypoint"])
    # The overlay's entrypoint, with this machine's storage and MLflow server.
    args[args.index("--storage-path") + 1] = str(tmp_path / "sweeps")
    (tmp_path / "mlflow").mkdir()
    server, uri = start_mlflow_server(tmp_path / "mlflow")
    args[args.index("--tracking-uri") + 1] = uri
    env = head_environment()
    submission_id = f"versatil-{uuid.uuid4().hex[:8]}"
    head = None
    try:
        head = start_ray_head(num_cpus=2, env=env)
        ray_job(
            env, "submit", "--address", head.dashboard, "--submission-id", submission_id,
            "--no-wait", "--", "python", "-m", "versatil.sweep", *args, *SMALLER,
        )  # fmt: skip
        deadline = time.monotonic() + 900
        status = job_status(head.dashboard, submission_id)
        while status["status"] not in TERMINAL and time.monotonic() < deadline:
            time.sleep(2)
            status = job_status(head.dashboard, submission_id)
        logs = ray_job(env, "logs", "--address", head.dashboard, submission_id)
        if status["status"] not in TERMINAL:
            ray_job(env, "stop", "--address", head.dashboard, submission_id)
        assert status["status"] == "SUCCEEDED", f"{status}\n{logs[-4000:]}"
        printed = ray_job(env, "status", "--address", head.dashboard, submission_id)
        assert f"Job '{submission_id}' succeeded" in printed, printed
        assert "4 completed" in logs, logs[-4000:]

        # The runs are in MLflow: the sweep's parent run and one finished child per trial.
        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name("quickstart")
        assert experiment is not None
        runs = client.search_runs([experiment.experiment_id], max_results=100)
        parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
        assert len(parents) == 1 and parents[0].info.status == "FINISHED"
        assert len(children) == 4
        for run in children:
            assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
            assert run.data.tags["versatil.status"] == "completed"
            assert "val_loss" in run.data.metrics
    finally:
        if head is not None:
            stop_ray_head(head)
        stop_mlflow_server(server)
