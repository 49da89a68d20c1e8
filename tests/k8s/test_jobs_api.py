"""The RayJob path for real: a sweep submitted through a Ray head's job server.

KubeRay runs a RayJob by starting a Ray head with its dashboard and job server, then calling
``ray job submit --address http://<head>:8265 -- <entrypoint>``. This test makes that call
to a real local head (``ray start --head`` with ``ray[default]``), on loopback, with the
entrypoint of ``k8s/overlays/cpu`` pointed at local storage and a real MLflow server, waits
for the job to succeed and finds the sweep's runs in MLflow.

The quickstart is cut from 16 trials of 3 epochs to 4 of 1 epoch, with no re-timing at the
end (``--set``): the full one takes minutes on a shared 2-core machine, and the Jobs API path
is the same either way.

A second job submits a sweep of a user's module that exists only in the job's
``--working-dir`` (as ``ray job submit --working-dir .`` or a RayJob's ``runtimeEnvYAML``
ships it): the driver and every trial find it there.

The head runs with Ray's token authentication, as the manifests' ``authOptions`` set it up:
a submission without the token, or with a wrong one, is refused; the CLI's ``--address``
without the token fails with one clear message.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.k8s.test_manifests import entrypoint_args, rendered, the
from tests.mlflow_server import start_mlflow_server, stop_mlflow_server
from tests.ray_head import RAY, RayHead, start_ray_head, stop_ray_head
from tests.user_project import write_project

pytestmark = pytest.mark.slow  # a Ray head with its job server, and mlflow server

REPO = Path(__file__).resolve().parents[2]
SMALLER = [
    "--set",
    "space.precision=[32, bf16-mixed]",
    "--set",
    "space.compile_mode=[none]",
    "--set",
    "trainer.max_epochs=1",
    "--set",
    "confirm.enabled=off",
]
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def head_environment(token: str) -> dict[str, str]:
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
        # As KubeRay sets them in every Ray container (authOptions: {mode: token}).
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "RAY_USAGE_STATS_ENABLED": "0",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }


def without_token(env: dict[str, str], token: str | None = None) -> dict[str, str]:
    """``env`` of a client without the head's token: none, or ``token`` (a wrong one).

    HOME is an empty directory: Ray would read a token from ``~/.ray/auth_token``.
    """
    client = {k: v for k, v in env.items() if not k.startswith("RAY_AUTH")}
    client["HOME"] = tempfile.mkdtemp(prefix="home-")
    if token is not None:
        client.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    return client


def job_status(head: RayHead, submission_id: str) -> dict:
    """The job's record from the job server's REST API, which ``ray job status`` reads.

    Polled over HTTP: one CLI call costs seconds of interpreter start on a busy machine.
    """
    return head.get(f"/api/jobs/{submission_id}")


def assert_refused(head: RayHead, env: dict[str, str]) -> None:
    """The job server refuses a submission, and its REST API a read, from ``env``."""
    result = subprocess.run(
        [*RAY, "job", "submit", "--address", head.dashboard, "--no-wait", "--", "true"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0, result.stdout + result.stderr
    assert re.search(r"401|[Uu]nauthori[sz]ed|[Aa]uthentication", result.stderr), result.stderr
    request = urllib.request.Request(f"{head.dashboard}/api/jobs/")
    if env.get("RAY_AUTH_TOKEN"):
        request.add_header("Authorization", f"Bearer {env['RAY_AUTH_TOKEN']}")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code in (401, 403)


NO_AGENT = "No available agent to submit job, please try again later"


def ray_job(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    """Runs ``ray job ARGS`` and returns its output; fails on a non-zero exit.

    A new head's job server answers before the head's agent has registered with it; it
    then refuses a submission, saying to try again: that answer is waited out (within
    ``timeout``), as the server asks.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = subprocess.run(
            [*RAY, "job", *args], env=env, capture_output=True, text=True, timeout=timeout
        )
        said = result.stdout + result.stderr
        if result.returncode == 0 or NO_AGENT not in said or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert result.returncode == 0, said
    return result.stdout


def wait_for_job(env: dict[str, str], head: RayHead, submission_id: str) -> str:
    """Waits for the job to end; returns its logs, having failed unless it succeeded."""
    deadline = time.monotonic() + 900
    status = job_status(head, submission_id)
    while status["status"] not in TERMINAL and time.monotonic() < deadline:
        time.sleep(2)
        status = job_status(head, submission_id)
    logs = ray_job(env, "logs", "--address", head.dashboard, submission_id)
    if status["status"] not in TERMINAL:
        ray_job(env, "stop", "--address", head.dashboard, submission_id)
    assert status["status"] == "SUCCEEDED", f"{status}\n{logs[-4000:]}"
    return logs


def submit_a_working_dir_module(env, head, tmp_path, uri):
    """A sweep of a module that exists only in the job's --working-dir: its trials complete.

    The job's own runtime_env ships the directory to the driver and every worker; the sweep
    adds none of its own (Ray would refuse two working_dirs).
    """
    project = tmp_path / "project"
    write_project(project, str(tmp_path / "sweeps"), name="workdir")
    submission_id = f"versatil-{uuid.uuid4().hex[:8]}"
    ray_job(
        env, "submit", "--address", head.dashboard, "--submission-id", submission_id,
        "--working-dir", str(project), "--runtime-env-json", '{"excludes": ["big.bin"]}',
        "--no-wait", "--", "python", "-m", "versatil.sweep", "--config", "sweep.yaml",
        "--tracking-uri", uri, "--set", "trainer.max_epochs=1",
    )  # fmt: skip
    logs = wait_for_job(env, head, submission_id)
    assert "2 trials in" in logs and "2 completed" in logs, logs[-4000:]
    assert "code: shipping" not in logs  # the job's working_dir carried the code
    experiment = MlflowClient(uri).get_experiment_by_name("workdir")
    runs = MlflowClient(uri).search_runs([experiment.experiment_id], max_results=100)
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert sorted(r.data.tags["versatil.status"] for r in children) == ["completed"] * 2


def test_quickstart_submitted_through_the_job_server_logs_its_trials_to_mlflow(tmp_path):
    job = the(rendered("overlays/cpu"), "RayJob")
    args = entrypoint_args(job["spec"]["entrypoint"])
    # The overlay's entrypoint, with this machine's storage and MLflow server.
    args[args.index("--storage-path") + 1] = str(tmp_path / "sweeps")
    (tmp_path / "mlflow").mkdir()
    server, uri = start_mlflow_server(tmp_path / "mlflow")
    args[args.index("--tracking-uri") + 1] = uri
    env = head_environment(secrets.token_hex(32))
    submission_id = f"versatil-{uuid.uuid4().hex[:8]}"
    head = None
    try:
        head = start_ray_head(num_cpus=2, env=env)
        assert_refused(head, without_token(env))
        assert_refused(head, without_token(env, token=secrets.token_hex(32)))
        # The CLI's --address without the token: one clear error, exit status 2.
        refused = subprocess.run(
            [sys.executable, "-m", "versatil.sweep", "--address", head.address, *args, *SMALLER],
            env=without_token(env), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert refused.stderr.startswith("error: --address: the Ray cluster at "), refused.stderr
        assert "RAY_AUTH_TOKEN" in refused.stderr and "Traceback" not in refused.stderr
        ray_job(
            env, "submit", "--address", head.dashboard, "--submission-id", submission_id,
            "--no-wait", "--", "python", "-m", "versatil.sweep", *args, *SMALLER,
        )  # fmt: skip
        logs = wait_for_job(env, head, submission_id)
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
        submit_a_working_dir_module(env, head, tmp_path, uri)
    finally:
        if head is not None:
            stop_ray_head(head)
        stop_mlflow_server(server)
