"""The head node lost mid-sweep, and the retried command finishes the sweep.

What a RayJob does when its head pod dies: KubeRay starts a new head (with new worker
pods), and the job's retry runs the same command, ``--auto-resume`` among its options. Here
a cluster of its own (a head and a 1-CPU worker node) runs a sweep whose storage path is a
bucket of moto's S3 server, with a real ``mlflow server``; once the bucket shows two trials
finished and the third's first epoch (it then waits at a gate), the driver and the head
node's processes are SIGKILLed by PID (in a RayJob the driver runs on the head), then the
worker node's. A new cluster starts, and the very same command, pointed at it by
``RAY_ADDRESS``, resumes from the bucket and finishes the sweep.
"""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.mlflow_server import start_mlflow_server, stop_mlflow_server
from tests.s3_server import start_s3_server, stop_s3_server
from tests.sweep.drivers import cli, gated_sweep, kill_leftovers, node_processes, wait_for
from tests.sweep.engine.test_node_loss import alive
from tests.sweep.exactly_once import assert_exactly_once
from versatil.sweep.storage import Storage, parse_location
from versatil.sweep.tracking import child_runs, reopen_sweep_run
from versatil.sweep.vocab.names import SWEEP_ENDED

pytestmark = pytest.mark.slow  # two clusters, two servers and two sweep drivers

LRS = [0.001, 0.002, 0.003, 0.004]
BUCKET = "sweeps"
STORAGE = f"s3://{BUCKET}/team"


RETRY_S = 420  # the retry alone takes about 30 s on 2 cores


def worker_logs(cluster):
    """The tails of the cluster's newest worker logs and of its raylets' (what a hang did)."""
    logs = Path(cluster.head_node.get_logs_dir_path())
    files = sorted(logs.glob("worker-*.err"), key=lambda p: p.stat().st_mtime)[-3:]
    files += sorted(logs.glob("raylet*.out"))
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in files)


def start_cluster():
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes(timeout=120)
    return cluster


def lost_state(s3):
    """The gated trial's worker PID once the bucket's newest experiment state holds two
    trials finished and the gated one's first epoch (lr 0.003, waiting at the gate); else None.
    """
    keys = sorted(k for k in s3.keys(BUCKET, "team/") if "/experiment_state-" in k)
    if not keys:
        return None
    body = s3.client().get_object(Bucket=BUCKET, Key=keys[-1])["Body"].read()
    last = [json.loads(metadata)["last_result"] for _, metadata in json.loads(body)["trial_data"]]
    finished = [r for r in last if r.get("status") == "completed"]
    gated = [r for r in last if r.get("config", {}).get("lr") == 0.003 and "epoch" in r]
    return gated[0]["pid"] if len(finished) >= 2 and gated else None


def test_the_head_lost_and_the_same_command_with_auto_resume_finishes(
    ray_cluster, tmp_path, monkeypatch
):
    data = gated_sweep(
        tmp_path,
        "headloss",
        LRS,
        gated_lr=0.003,
        max_concurrent_trials=1,
        trainer={"max_epochs": 3, "accelerator": "cpu"},
        storage_path=STORAGE,
    )
    path = tmp_path / "headloss.yaml"
    path.write_text(yaml.safe_dump(data))
    (tmp_path / "mlflow").mkdir()
    s3 = start_s3_server(tmp_path / "moto.log")
    server = None
    try:
        s3.client().create_bucket(Bucket=BUCKET)
        # The clusters' nodes and both drivers inherit the store's variables.
        for name, value in s3.environment().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        server, uri = start_mlflow_server(tmp_path / "mlflow")
        first, resumed = lose_the_head_and_retry(tmp_path, path, uri, s3)
        assert "--auto-resume: no interrupted run of 'headloss'; starting one" in first
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        out = resumed.stdout
        storage = Storage(parse_location("storage_path", STORAGE))
        (name,) = storage.directories()
        assert f"--auto-resume: resuming the interrupted run {STORAGE}/{name}" in out
        assert "4 trials in" in out and "4 completed" in out
        assert storage.exists(name, SWEEP_ENDED)  # a third attempt would start anew
        experiment_dir = storage.pull(name)
        counted = assert_exactly_once(experiment_dir, uri)
        assert (counted.trials, counted.epochs) == (4, 12)
        # No configuration ran twice: one child run per learning rate.
        children = child_runs(MlflowClient(uri), reopen_sweep_run(experiment_dir, uri))
        assert sorted(float(c.data.params["lr"]) for c in children) == LRS
        assert not (tmp_path / "runs").exists()  # nothing on the local disk
    finally:
        if server is not None:
            stop_mlflow_server(server)
        stop_s3_server(s3)


def lose_the_head_and_retry(tmp_path, path, uri, s3):
    """Runs the command, loses the head mid-sweep, and runs it again on a new cluster.

    Returns the first driver's output and the retry's process.
    """
    command = cli("--config", str(path), "--tracking-uri", uri, "--auto-resume")
    cluster = driver = None
    try:
        cluster = start_cluster()
        env = {**os.environ, "RAY_ADDRESS": cluster.address}
        errors = (tmp_path / "driver.err").open("w")
        driver = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=errors, text=True
        )

        def reached(state):
            if driver.poll() is not None:  # the driver must not end before the head is lost
                raise AssertionError((tmp_path / "driver.err").read_text()[-3000:])
            return state()

        wait_for(
            lambda: reached(lambda: lost_state(s3)),
            "the bucket holding two trials done and the third's first epoch",
        )
        worker = lost_state(s3)
        # The head pod dies: its driver and every process of the head node, by PID.
        pods = [cluster.head_node, *cluster.worker_nodes]
        processes = set().union(*(node_processes(node) for node in pods))
        driver.kill()
        first, _ = driver.communicate(timeout=60)
        cluster.remove_node(cluster.head_node, allow_graceful=False)
        # Its worker pods go too (KubeRay gives the new head new ones).
        for node in list(cluster.worker_nodes):
            cluster.remove_node(node, allow_graceful=False)
        kill_leftovers(processes)  # a pod's end takes every process in it
        wait_for(lambda: not any(alive(p) for p in processes), "the lost pods' processes gone")
        wait_for(lambda: not alive(worker), "the gated trial's worker gone")
        (tmp_path / "gate").touch()

        cluster = start_cluster()
        # A retry that hangs is aborted: faulthandler prints every thread's stack first.
        env = {**os.environ, "RAY_ADDRESS": cluster.address, "PYTHONFAULTHANDLER": "1"}
        out, err = tmp_path / "retry.out", tmp_path / "retry.err"
        with out.open("w") as stdout, err.open("w") as stderr:
            retry = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr, text=True)
            try:
                retry.wait(timeout=RETRY_S)
            except subprocess.TimeoutExpired:
                retry.send_signal(signal.SIGABRT)
                try:
                    retry.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    retry.kill()
                    retry.wait(timeout=30)
                raise AssertionError(
                    f"the retry did not end in {RETRY_S} s:\n{out.read_text()[-3000:]}\n"
                    f"{err.read_text()[-6000:]}\n{worker_logs(cluster)}"
                ) from None
        resumed = subprocess.CompletedProcess(
            command, retry.returncode, out.read_text(), err.read_text()
        )
        return first, resumed
    finally:
        (tmp_path / "gate").touch()
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
        if cluster is not None:
            cluster.shutdown()
