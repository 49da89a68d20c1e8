"""``--resume`` after the driver is killed with SIGKILL: finished trials are never rerun."""

import os
import signal
import subprocess
import time

import pytest
import yaml

from tests.sweep.drivers import cli, finished_trials, gated_sweep, wait_cpus_freed
from tests.sweep.exactly_once import assert_exactly_once

pytestmark = pytest.mark.slow  # sweep drivers as subprocesses


def sweep_file(tmp_path):
    data = gated_sweep(
        tmp_path,
        "killed",
        [0.001, 0.002, 0.003, 0.004],
        gated_lr=0.003,
        max_concurrent_trials=1,
        trainer={"max_epochs": 3, "accelerator": "cpu"},
    )
    path = tmp_path / "killed.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_resume_after_sigkill_reruns_nothing_finished(ray_cluster, tmp_path):
    config = sweep_file(tmp_path)
    driver = subprocess.Popen(
        cli("--config", str(config), "--address", ray_cluster.address),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 240
    before, started = {}, []
    try:
        # The third trial (lr 0.003) reports one epoch and then waits for the gate file:
        # kill the driver while it waits, two trials finished and one half done.
        while time.monotonic() < deadline and (len(before) < 2 or len(started) <= 2):
            time.sleep(0.2)
            experiments = list((tmp_path / "runs").glob("killed-*"))
            before = finished_trials(experiments[0]) if experiments else {}
            started = list(experiments[0].glob("*/result.json")) if experiments else []
        # Tune commits its experiment state after the third trial's checkpoint: wait for a
        # snapshot newer than that trial's first result (observable, bounded).
        unfinished = [p for p in started if p.parent.name not in before]
        third = unfinished[0] if len(unfinished) == 1 else None
        while third is not None and time.monotonic() < deadline:
            states = [x.stat().st_mtime for x in third.parents[1].glob("experiment_state-*.json")]
            reported = third.read_text().strip() != ""
            if reported and states and max(states) > third.stat().st_mtime:
                break
            time.sleep(0.2)
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    assert len(before) == 2, f"finished before the kill: {before}"
    (tmp_path / "gate").touch()
    (experiment_dir,) = (tmp_path / "runs").glob("killed-*")
    wait_cpus_freed()  # the cluster notices the dead driver and frees its workers' CPUs

    resumed = subprocess.run(
        cli("--config", str(config), "--address", ray_cluster.address, "--resume"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"results: {experiment_dir}" in resumed.stdout
    assert "4 trials in" in resumed.stdout and "4 completed" in resumed.stdout
    after = finished_trials(experiment_dir)
    assert len(after) == 4
    for trial_id, results in before.items():
        assert after[trial_id] == results, f"{trial_id} was rerun"
        assert f"] {trial_id} epoch" not in resumed.stdout

    # MLflow: the resume continued the same parent run, with one child run per trial.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}")
    (parent,) = client.search_runs(
        [client.get_experiment_by_name("killed").experiment_id],
        filter_string="tags.`versatil.objective` = 'val_loss'",
    )
    children = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'",
    )
    assert len(children) == 4
    assert {c.data.tags["versatil.status"] for c in children} == {"completed"}
    assert_exactly_once(experiment_dir)
    assert parent.info.status == "FINISHED"


def test_resume_without_an_earlier_run_is_a_clear_error(tmp_path):
    result = subprocess.run(
        cli("--config", str(sweep_file(tmp_path)), "--resume"), capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: --resume: no earlier run of sweep 'killed' under ")
    assert "Traceback" not in result.stderr
