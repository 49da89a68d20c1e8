"""MLflow tracking against a real ``mlflow server`` and the embedded SQLite store."""

import io

import lightning
import pytest
import torch
from mlflow.tracking import MlflowClient

from versatil.errors import ConfigError
from versatil.sweep.runner import run_sweep
from versatil.sweep.tracking import child_runs
from versatil.training.constants import CheckpointFilename, CheckpointKey
from versatil.training.tasks.reaching import BehaviorCloningPolicy


def sweep(config, **kwargs):
    return run_sweep(config, stream=io.StringIO(), **kwargs)


def test_parent_and_child_runs_on_a_real_server(ray_cluster, mlflow_server, sweep_config, tmp_path):
    config = sweep_config(
        name="tracked",
        space={"precision": ["32", "16-mixed"], "lr": {"grid": [0.003, 0.01]}},
        trainer={"max_epochs": 3, "accelerator": "cpu"},
    )
    outcome = sweep(config, tracking_uri=mlflow_server)
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("tracked")
    parent = client.get_run(outcome.tracking.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["versatil.best_trial_id"] == outcome.best.trial_id
    children = child_runs(client, outcome.tracking)
    assert len(children) == 4 == len(outcome.rows)
    by_trial = {run.data.tags["versatil.trial_id"]: run for run in children}
    for row in outcome.rows:
        run = by_trial[row.trial_id]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["versatil.status"] == row.status
        assert run.data.params["precision"] == row.axes["precision"]
        assert run.data.params["compile_mode"] == "none"
        assert run.data.params["matmul_precision"] == "none"
        assert float(run.data.params["lr"]) == row.axes["lr"]
        if row.status == "infeasible":
            assert "16-mixed is not supported on cpu" in run.data.tags["versatil.reason"]
            continue
        assert run.data.params["model_dtype"] == "float32"
        assert run.data.params["autocast"] == "false"
        history = client.get_metric_history(run.info.run_id, "val_loss")
        assert [m.step for m in history] == [0, 1, 2]
        assert history[-1].value == pytest.approx(row.objective)
        for name in ("train_loss", "samples_per_sec", "epoch_time_s", "peak_memory_mb"):
            assert len(client.get_metric_history(run.info.run_id, name)) == 3
        assert "config.yaml" in {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {r.data.tags["versatil.status"] for r in children} == {"completed", "infeasible"}

    # The best trial's checkpoint is an artifact that plain Lightning loads.
    best_run = by_trial[outcome.best.trial_id]
    names = {a.path for a in client.list_artifacts(best_run.info.run_id, "checkpoint")}
    assert names == {"checkpoint/last.ckpt", "checkpoint/config.yaml"}
    local = client.download_artifacts(best_run.info.run_id, "checkpoint", str(tmp_path / "dl"))
    ckpt = f"{local}/{CheckpointFilename.DEFAULT_CHECKPOINT}"
    state = torch.load(ckpt, weights_only=False)
    assert CheckpointKey.STATE_DICT in state and CheckpointKey.INPUT_STATS in state
    BehaviorCloningPolicy.load_from_checkpoint(ckpt)
    assert lightning.__version__
    others = [r for t, r in by_trial.items() if t != outcome.best.trial_id]
    assert all(not client.list_artifacts(r.info.run_id, "checkpoint") for r in others)
    assert experiment is not None


def test_embedded_sqlite_store_is_the_default(ray_cluster, sweep_config, tmp_path):
    config = sweep_config(name="embedded", space={"lr": {"grid": [0.003]}})
    outcome = sweep(config)
    assert outcome.tracking.tracking_uri == f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"
    client = MlflowClient(outcome.tracking.tracking_uri)
    (child,) = child_runs(client, outcome.tracking)
    assert child.data.tags["versatil.status"] == "completed"
    assert child.info.artifact_uri.startswith((tmp_path / "runs" / "mlartifacts").as_uri())


def test_missing_tracking_server_is_a_clear_error(sweep_config):
    with pytest.raises(ConfigError) as error:
        sweep(sweep_config(space={"lr": {"grid": [0.003]}}), tracking_uri="http://127.0.0.1:9")
    assert str(error.value).startswith(
        "--tracking-uri: no MLflow server answers at 'http://127.0.0.1:9' ("
    )
    assert "omit --tracking-uri to use the embedded SQLite store" in str(error.value)
