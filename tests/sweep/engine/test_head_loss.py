"""The head node lost mid-sweep, and the retried command finishes the sweep.

What a RayJob does when its head pod dies: KubeRay starts a new head (with new worker
pods), and the job's retry runs the same command, ``--auto-resume`` among its options. Here
a cluster of its own (a head and a 1-CPU worker node) runs a sweep with a real
``mlflow server``; once two trials have finished and the third has reported an epoch and
waits at a gate, the driver and the head node's processes are SIGKILLed by PID (in a
RayJob the driver runs on the head), then the worker node's. A new cluster starts, and the
very same command, pointed at it by ``RAY_ADDRESS``, resumes and finishes the sweep.
"""

import json
import os
import subprocess

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.mlflow_server import start_mlflow_server, stop_mlflow_server
from tests.sweep.drivers import cli, gated_sweep, wait_for
from tests.sweep.engine.test_node_loss import alive
from tests.sweep.exactly_once import assert_exactly_once
from versatil.sweep.tracking import child_runs, reopen_sweep_run
from versatil.sweep.vocab.names import SWEEP_ENDED

pytestmark = pytest.mark.slow  # two clusters, a server and two sweep drivers

LRS = [0.001, 0.002, 0.003, 0.004]


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


def whole_lines(text):
    """The results of a ``result.json`` being written: its whole lines only."""
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def lost_state(experiment_dir):
    """The gated trial's ``result.json`` once Tune has saved its state after it; else None.

    Two trials finished, the third (lr 0.003) reported its first epoch and waits at the gate.
    """
    results = {p: whole_lines(p.read_text()) for p in experiment_dir.glob("*/result.json")}
    finished = [r for r in results.values() if r and r[-1]["status"] == "completed"]
    gated = [p for p, r in results.items() if r and r[0]["config"]["lr"] == 0.003]
    states = [s.stat().st_mtime for s in experiment_dir.glob("experiment_state-*.json")]
    if len(finished) < 2 or not gated or not states:
        return None
    return gated[0] if max(states) > gated[0].stat().st_mtime else None


def test_the_head_lost_and_the_same_command_with_auto_resume_finishes(ray_cluster, tmp_path):
    data = gated_sweep(
        tmp_path,
        "headloss",
        LRS,
        gated_lr=0.003,
        max_concurrent_trials=1,
        trainer={"max_epochs": 3, "accelerator": "cpu"},
    )
    path = tmp_path / "headloss.yaml"
    path.write_text(yaml.safe_dump(data))
    (tmp_path / "mlflow").mkdir()
    server, uri = start_mlflow_server(tmp_path / "mlflow")
    try:
        experiment_dir, first, resumed = lose_the_head_and_retry(tmp_path, path, uri)
        assert "--auto-resume: no interrupted run of 'headloss'; starting one" in first
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        out = resumed.stdout
        assert f"--auto-resume: resuming the interrupted run {experiment_dir}" in out
        assert "4 trials in" in out and "4 completed" in out
        assert (experiment_dir / SWEEP_ENDED).exists()  # a third attempt would start anew
        counted = assert_exactly_once(experiment_dir, uri)
        assert (counted.trials, counted.epochs) == (4, 12)
        # No configuration ran twice: one child run per learning rate.
        children = child_runs(MlflowClient(uri), reopen_sweep_run(experiment_dir, uri))
        assert sorted(float(c.data.params["lr"]) for c in children) == LRS
    finally:
        stop_mlflow_server(server)


def lose_the_head_and_retry(tmp_path, path, uri):
    """Runs the command, loses the head mid-sweep, and runs it again on a new cluster.

    Returns the experiment directory, the first driver's output and the retry's process.
    """
    command = cli("--config", str(path), "--tracking-uri", uri, "--auto-resume")
    runs = tmp_path / "runs"
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

        wait_for(lambda: reached(lambda: list(runs.glob("headloss-*"))), "the experiment dir")
        (experiment_dir,) = runs.glob("headloss-*")
        wait_for(
            lambda: reached(lambda: lost_state(experiment_dir)),
            "two trials done, the third waiting",
        )
        worker = json.loads(lost_state(experiment_dir).read_text().splitlines()[0])["pid"]
        # The head pod dies: its driver and every process of the head node, by PID.
        driver.kill()
        first, _ = driver.communicate(timeout=60)
        cluster.remove_node(cluster.head_node, allow_graceful=False)
        # Its worker pods go too (KubeRay gives the new head new ones).
        for node in list(cluster.worker_nodes):
            cluster.remove_node(node, allow_graceful=False)
        wait_for(lambda: not alive(worker), "the gated trial's worker gone")
        (tmp_path / "gate").touch()

        cluster = start_cluster()
        env = {**os.environ, "RAY_ADDRESS": cluster.address}
        resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        return experiment_dir, first, resumed
    finally:
        (tmp_path / "gate").touch()
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
        if cluster is not None:
            cluster.shutdown()
