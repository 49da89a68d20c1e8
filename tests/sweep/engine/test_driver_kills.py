"""The driver SIGKILLed before the first result and during its final logging, then resumed.

(Mid-sweep, with trials finished and one half done: ``test_resume.py``.) After
``--resume`` MLflow holds every trial once and every epoch Tune recorded once, no run is
left RUNNING and the parent run is FINISHED.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.sweep.drivers import cli, gated_sweep, run, wait_cpus_freed, wait_for
from tests.sweep.exactly_once import assert_exactly_once
from versatil.sweep.tracking import child_runs, reopen_sweep_run

pytestmark = pytest.mark.slow  # sweep drivers killed and resumed


def sweep_file(tmp_path, gated_epoch):
    data = gated_sweep(
        tmp_path,
        "killed",
        [0.001, 0.002, 0.003],
        gated_epoch=gated_epoch,
        max_concurrent_trials=1,
        trainer={"max_epochs": 2, "accelerator": "cpu"},
        mlflow={"log_checkpoints": "all"},
    )
    path = tmp_path / "killed.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("point", ["before_first_result", "final_logging"])
def test_driver_killed_then_resumed_logs_everything_once(ray_cluster, tmp_path, point):
    config = sweep_file(tmp_path, gated_epoch=0 if point == "before_first_result" else 99)
    runs = tmp_path / "runs"
    args = ("--config", str(config), "--address", ray_cluster.address)
    marker = tmp_path / "final-logging"
    if point == "final_logging":
        command = [sys.executable, "-m", "tests.sweep.pausing_driver", str(marker), *args]
    else:
        command = cli(*args)
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if point == "before_first_result":
            # The first trial waits before its first epoch; Tune has saved its state.
            wait_for(lambda: Path(f"{tmp_path / 'gate'}.waiting").exists(), "the gate")
            wait_for(lambda: list(runs.glob("killed-*/experiment_state-*.json")), "a snapshot")
        else:
            wait_for(marker.exists, "the final logging")
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    (experiment_dir,) = runs.glob("killed-*")
    results = list(experiment_dir.glob("*/result.json"))
    if point == "before_first_result":
        assert all(p.read_text().strip() == "" for p in results), "a result came first"
    else:
        assert len(results) == 3  # every trial had ended
    (tmp_path / "gate").touch()
    wait_cpus_freed()

    resumed = run(cli(*args, "--resume"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "3 trials in" in resumed.stdout, resumed.stderr[-3000:]
    assert "3 completed" in resumed.stdout and "warning: MLflow" not in resumed.stderr
    counted = assert_exactly_once(experiment_dir)
    assert counted.trials == 3 and counted.epochs == 6
    context = reopen_sweep_run(experiment_dir)
    client = MlflowClient(context.tracking_uri)
    for child in child_runs(client, context):  # log_checkpoints: all, each logged once
        names = [f.path for f in client.list_artifacts(child.info.run_id, "checkpoint")]
        assert "checkpoint/last.ckpt" in names, names
