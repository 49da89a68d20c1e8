"""A trial's child run against a real MLflow SQLite store: its tags, params, epochs and end."""

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from versatil.sweep.tracking.child_run import ChildRun, mlflow_key, trial_params
from versatil.sweep.tracking.store import default_tracking_uri, open_sweep_run
from versatil.sweep.vocab import tags
from versatil.training.config import TrainConfig

AXES = {"precision": "bf16-mixed", "compile_mode": "none", "lr": 0.003}


@pytest.fixture
def sweep(mlflow_sqlite, tmp_path):
    """A client of a new embedded store and a sweep's parent run in it."""
    context = open_sweep_run(
        tracking_uri=default_tracking_uri(tmp_path),
        experiment="children",
        experiment_dir=tmp_path / "children-1",
        storage_dir=tmp_path,
        sweep_yaml="name: children\n",
        objective="val_loss",
        mode="min",
    )
    return MlflowClient(mlflow_sqlite), context


def open_child(client, context, trial_id="t_00000", axes=AXES, config=None):
    return ChildRun.open(
        client, context, trial_id=trial_id, trial_name=f"{trial_id}_name", axes=axes, config=config
    )


def test_a_new_child_run_is_tagged_named_by_its_axes_and_running(sweep):
    client, context = sweep
    child = open_child(client, context)
    run = client.get_run(child.run_id)
    assert run.info.run_name == "bf16-mixed/eager/lr=0.003"
    assert run.info.status == "RUNNING" and run.info.experiment_id == context.experiment_id
    assert {k: run.data.tags[k] for k in (tags.PARENT, tags.TRIAL_ID, tags.TRIAL_NAME)} == {
        tags.PARENT: context.parent_run_id,
        tags.TRIAL_ID: "t_00000",
        tags.TRIAL_NAME: "t_00000_name",
    }
    assert run.data.tags[tags.AXES] == "precision,compile_mode,lr"
    assert run.data.tags[tags.STATUS] == "running"
    # Its params wait for the first epoch's request.
    assert run.data.params == {}
    assert child.pending == {"precision": "bf16-mixed", "compile_mode": "none", "lr": "0.003"}


def test_a_trial_with_a_config_logs_its_settings_task_params_and_config(sweep, tmp_path):
    client, context = sweep
    config = TrainConfig.from_mapping(
        {"params": {"width": 16, "lr": 0.003}, "precision": "bf16-mixed", "accelerator": "cpu"}
    )
    child = open_child(client, context, config=config)
    child.log_params({})
    params = client.get_run(child.run_id).data.params
    assert params == trial_params(AXES, config)
    assert {k: params[k] for k in ("task", "width", "model_dtype", "autocast")} == {
        "task": "reaching",
        "width": "16",
        "model_dtype": "bfloat16",
        "autocast": "true",
    }
    path = client.download_artifacts(child.run_id, "config.yaml", str(tmp_path))
    assert "precision: bf16-mixed" in Path(path).read_text()


def test_each_metric_of_an_epoch_is_logged_once_at_the_epoch_as_step(sweep):
    client, context = sweep
    child = open_child(client, context)
    result = {
        "epoch": 1,
        "val_loss": 0.25,
        "samples_per_sec": 90,
        "time_total_s": 3.0,  # bookkeeping, not a metric
        "done": False,
        "objective_unset": float("inf"),  # stands for no value
    }
    assert child.log_epoch(result) == 2
    assert child.holds(1) and not child.holds(0)
    assert child.log_epoch({**result, "val_loss": 0.125}) == 0  # a report again: skipped
    held = client.get_run(child.run_id).data
    assert held.metrics == {"val_loss": 0.25, "samples_per_sec": 90.0}
    assert [(m.step, m.value) for m in client.get_metric_history(child.run_id, "val_loss")] == [
        (1, 0.25)
    ]
    assert held.params["lr"] == "0.003"  # the pending params went with the epoch


def test_finish_ends_the_run_with_the_trials_status_and_reason(sweep):
    client, context = sweep
    for trial_id, status, mlflow_status in [
        ("t_1", "completed", "FINISHED"),
        ("t_2", "stopped", "KILLED"),
        ("t_3", "failed", "FAILED"),
    ]:
        child = open_child(client, context, trial_id)
        child.finish(status, "out of memory" if status == "failed" else "")
        run = client.get_run(child.run_id)
        assert (run.info.status, run.data.tags[tags.STATUS]) == (mlflow_status, status)
        assert run.data.tags.get(tags.REASON) == ("out of memory" if status == "failed" else None)
        assert run.data.params == {"precision": "bf16-mixed", "compile_mode": "none", "lr": "0.003"}
        assert child.ended


def test_a_retried_trial_continues_its_ended_run(sweep):
    client, context = sweep
    first = open_child(client, context)
    first.log_epoch({"epoch": 0, "val_loss": 1.0})
    first.finish("failed", "worker died")
    retried = open_child(MlflowClient(context.tracking_uri), context)
    assert retried.run_id == first.run_id and retried.ended
    assert retried.holds(0) and retried.pending == {}  # its params are already held
    retried.reopen()
    assert not retried.ended
    assert client.get_run(first.run_id).info.status == "RUNNING"
    retried.log_epoch({"epoch": 0, "val_loss": 0.5})
    retried.log_epoch({"epoch": 1, "val_loss": 0.4})
    steps = [m.step for m in client.get_metric_history(first.run_id, "val_loss")]
    assert sorted(steps) == [0, 1]


def test_a_param_held_with_another_value_goes_under_hparams(sweep):
    client, context = sweep
    child = open_child(client, context)
    child.log_params({"lr": "0.003", "width": "64"})  # lr: the axis' own value
    child.log_params({"lr": "0.1"})
    child.log_params({"lr": "0.1"})  # already held as hparams.lr: nothing new
    assert client.get_run(child.run_id).data.params == {
        "precision": "bf16-mixed",
        "compile_mode": "none",
        "lr": "0.003",
        "width": "64",
        "hparams.lr": "0.1",
    }


def test_mlflow_key_keeps_what_mlflow_accepts_and_cuts_to_its_limit():
    assert mlflow_key("head.0/loss_x-y z") == "head.0/loss_x-y z"
    assert mlflow_key("loss[0]:val@top-1%") == "loss_0__val_top-1_"
    assert mlflow_key("k" * 300) == "k" * 250


def test_trial_params_without_a_config_are_the_axes_flattened():
    axes = {"precision": "32", "optimizer": {"lr": 0.02, "betas": [0.9, 0.99]}, "seed": None}
    assert trial_params(axes, None) == {
        "precision": "32",
        "optimizer.lr": "0.02",
        "optimizer.betas": "[0.9, 0.99]",
        "seed": "none",
    }
