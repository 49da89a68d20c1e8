"""A user's task reaches a node that cannot see the driver's files.

A cluster of two nodes on this machine: a head with no CPUs and one worker node in a mount
namespace of its own, where the directory the sweep starts from (the user's project, with
its task module) is covered by an empty tmpfs, as on a node of another machine. Every trial
must run there, so the task's code must travel with the sweep (Ray's ``runtime_env``).

Twice: with the storage path on a directory both nodes see (a network disk), and on
moto's S3 server with the worker node seeing none of the test's files at all.
"""

import json
import os
import secrets
import subprocess

import pytest
import yaml

from tests.ray_head import start_joined_node, start_ray_head, stop_ray_head, stop_ray_node
from tests.s3_server import start_s3_server, stop_s3_server
from tests.sweep.drivers import cli
from tests.user_project import write_project

pytestmark = pytest.mark.slow  # two Ray nodes, a sweep driver and (once) an S3 server

BUCKET = "hidden-node"


def cluster_environment():
    """The nodes' and driver's environment: loopback only, Ray's token, no project path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "PYTHONPATH"))}
    env.update(
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=secrets.token_hex(32),
        RAY_USAGE_STATS_ENABLED="0",
        MLFLOW_DISABLE_TELEMETRY="true",
    )
    return env


def trial_results(storage_dir):
    """Every result line of every trial of the sweep, from Tune's ``result.json`` files."""
    paths = sorted(storage_dir.glob("hidden-*/*/result.json"))
    return {p.parent.name: [json.loads(line) for line in p.read_text().splitlines()] for p in paths}


def run_hidden_sweep(project, env, hidden, extra_args=()):
    """Starts the cluster, runs the sweep from ``project`` against it; returns the run."""
    head = start_ray_head(num_cpus=0, env=env, host="127.0.0.2")
    node = None
    try:
        node = start_joined_node(head, 2, num_cpus=2, env=env, hidden=hidden)
        return subprocess.run(
            cli("--config", "sweep.yaml", "--address", head.address, *extra_args),
            cwd=project, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        if node is not None:
            stop_ray_node(node)
        stop_ray_head(head)


def assert_every_trial_on_the_hidden_node(done, results):
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "2 trials in" in done.stdout and "2 completed" in done.stdout, done.stdout[-3000:]
    shipped = next(line for line in done.stdout.splitlines() if line.startswith("code: "))
    assert "as working_dir" in shipped and "big.bin (11.0 MiB)" in shipped, shipped
    assert len(results) == 2
    for lines in results.values():
        epochs = [r for r in lines if "val_loss" in r]
        assert [r["epoch"] for r in epochs] == [0, 1]
        # Trained where the driver's files are out of sight: on the hidden node.
        assert {r["sees_driver_files"] for r in epochs} == {0.0}


def test_a_user_task_runs_on_a_node_that_cannot_see_the_driver_directory(tmp_path):
    project = tmp_path / "project"
    shared = tmp_path / "shared"
    write_project(project, str(shared / "runs"))
    env = cluster_environment()
    done = run_hidden_sweep(project, env, hidden=[project])
    assert_every_trial_on_the_hidden_node(done, trial_results(shared / "runs"))


def test_a_user_task_on_a_hidden_node_with_storage_on_s3(tmp_path):
    s3 = start_s3_server(tmp_path / "moto.log")
    try:
        s3.client().create_bucket(Bucket=BUCKET)
        project = tmp_path / "project"
        write_project(project, f"s3://{BUCKET}/sweeps")
        env = {**cluster_environment(), **s3.environment()}
        env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
        uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        # The worker node sees none of this test's files: no filesystem is shared.
        done = run_hidden_sweep(project, env, hidden=[tmp_path], extra_args=("--tracking-uri", uri))
        mirror = tmp_path / "mirror"
        # The bucket holds Tune's records: read them back as `sync` would.
        keys = [k for k in s3.keys(BUCKET, "sweeps/") if k.endswith("/result.json")]
        for key in keys:
            target = mirror / key.removeprefix("sweeps/")
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.client().download_file(BUCKET, key, str(target))
    finally:
        stop_s3_server(s3)
    assert_every_trial_on_the_hidden_node(done, trial_results(mirror))


def test_a_race_screens_a_user_task_on_a_node_that_cannot_see_the_driver_directory(tmp_path):
    """The screen's task builds the user's model where it runs: the hidden node."""
    project = tmp_path / "project"
    shared = tmp_path / "shared"
    write_project(project, str(shared / "runs"))
    sweep = yaml.safe_load((project / "sweep.yaml").read_text())
    sweep["space"]["precision"] = ["32", "bf16-true"]
    sweep["search"] = {"algorithm": "race", "race": {"rounds": 6, "round_s": 0.1}}
    (project / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    done = run_hidden_sweep(project, cluster_environment(), hidden=[project])
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "race: screening 2 settings from initial weights" in done.stdout
    assert "race: screened in " in done.stdout
    (screen,) = (shared / "runs").glob("hidden-*/race/screen.json")
    rounds = json.loads(screen.read_text())["samples_per_sec"]
    assert set(rounds) == {"32 + eager", "bf16-true + eager"}
    assert all(len(r) >= 1 and all(v > 0 for v in r) for r in rounds.values())
    results = trial_results(shared / "runs")
    assert results, done.stdout[-3000:]
    for lines in results.values():
        epochs = [r for r in lines if "val_loss" in r]
        assert {r["sees_driver_files"] for r in epochs} == {0.0}
