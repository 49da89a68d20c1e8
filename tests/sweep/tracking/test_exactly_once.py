"""An epoch reaches a trial's MLflow run once, however often it is reported."""

import pytest
from mlflow.tracking import MlflowClient

from versatil.sweep.tracking import ChildRun, default_tracking_uri, open_sweep_run

# Each test's store is tmp_path/mlflow.db, the default_tracking_uri of its storage path.
pytestmark = pytest.mark.usefixtures("mlflow_sqlite")


def open_child(storage, experiment_dir, trial_id="t_00000"):
    """What a sweep's driver does for a trial: open (or reopen) the parent, then the child."""
    context = open_sweep_run(
        tracking_uri=default_tracking_uri(storage),
        experiment="once",
        experiment_dir=experiment_dir,
        storage_dir=storage,
        sweep_yaml="name: once\n",
        objective="val_loss",
        mode="min",
    )
    client = MlflowClient(context.tracking_uri)
    return client, ChildRun.open(
        client, context, trial_id=trial_id, trial_name=trial_id, axes={"lr": 0.01}, config=None
    )


def result(epoch):
    return {"epoch": epoch, "val_loss": 1.0 / (epoch + 1), "samples_per_sec": 100.0 + epoch}


def test_a_restored_trial_reporting_an_epoch_again_logs_it_once(tmp_path):
    storage, experiment_dir = tmp_path, tmp_path / "once-1"
    client, child = open_child(storage, experiment_dir)
    child.log_epoch(result(0))
    child.log_epoch(result(1))
    # A new driver (--resume after the old one was killed) finds the same run, and Tune
    # reports the last epoch it had recorded again before the trial goes on.
    client, again = open_child(storage, experiment_dir)
    assert again.run_id == child.run_id
    again.log_epoch(result(1))
    again.log_epoch(result(2))
    again.log_epoch(result(2))  # and a retry within one driver
    for metric in ("val_loss", "samples_per_sec"):
        steps = [m.step for m in client.get_metric_history(child.run_id, metric)]
        assert sorted(steps) == [0, 1, 2], (metric, steps)


def test_params_beyond_mlflows_limits_are_logged_not_crashed(tmp_path):
    client, child = open_child(tmp_path, tmp_path / "once-1")
    params = {f"layer.{i}.width": str(i) for i in range(250)}  # MLflow takes 100 per call
    params["vocabulary"] = "x" * 10_000  # MLflow takes 6,000 characters
    child.log_params(params)
    # A module hyperparameter named like a task param, with another value.
    child.log_params({"lr": "0.02"})
    held = client.get_run(child.run_id).data
    assert {f"layer.{i}.width" for i in range(250)} <= set(held.params)
    assert len(held.params["vocabulary"]) == 6000
    assert held.params["vocabulary"].endswith("... [truncated from 10000 characters]")
    assert held.tags["versatil.truncated_params"] == "vocabulary"
    assert held.params["lr"] == "0.01" and held.params["hparams.lr"] == "0.02"


class CountingClient(MlflowClient):
    """A real client that counts the requests it makes."""

    def __init__(self, uri):
        super().__init__(uri)
        self.batches = []

    def log_batch(self, run_id, metrics=(), params=(), tags=(), **kwargs):
        self.batches.append((len(metrics), len(params), len(tags)))
        return super().log_batch(run_id, metrics=metrics, params=params, tags=tags, **kwargs)


def test_a_runs_params_go_out_with_its_first_epoch_in_one_request(tmp_path):
    context = open_sweep_run(
        tracking_uri=default_tracking_uri(tmp_path),
        experiment="once",
        experiment_dir=tmp_path / "once-1",
        storage_dir=tmp_path,
        sweep_yaml="name: once\n",
        objective="val_loss",
        mode="min",
    )
    client = CountingClient(context.tracking_uri)
    child = ChildRun.open(
        client, context, trial_id="t_1", trial_name="t_1", axes={"lr": 0.01}, config=None
    )
    assert client.batches == []
    child.log_epoch({**result(0), "hparams": {"width": "64", "lr": "0.02"}})
    # lr (the axis), width and hparams.lr (the module's own lr, another value): one request.
    assert client.batches == [(2, 3, 0)]
    held = client.get_run(child.run_id).data
    assert held.params == {"lr": "0.01", "width": "64", "hparams.lr": "0.02"}
    assert held.metrics == {"val_loss": 1.0, "samples_per_sec": 100.0}


def test_a_trial_that_ends_before_its_first_epoch_still_gets_its_params(tmp_path):
    client, child = open_child(tmp_path, tmp_path / "once-1")
    child.finish("failed", "bad params")
    run = client.get_run(child.run_id)
    assert run.data.params == {"lr": "0.01"}
    assert run.data.tags["versatil.status"] == "failed"
    assert run.info.status == "FAILED"


def test_an_epoch_beyond_one_requests_limits_is_split_and_logged_whole(tmp_path):
    client, child = open_child(tmp_path, tmp_path / "once-1")
    hparams = {f"layer.{i}.width": str(i) for i in range(150)}
    metrics = {f"head.{i}/loss": float(i) for i in range(1500)}
    assert child.log_epoch({"epoch": 0, **metrics, "hparams": hparams}) == 1500
    held = client.get_run(child.run_id).data
    assert len(held.params) == 151 and len(held.metrics) == 1500
    assert held.metrics["head.1499/loss"] == 1499.0


def test_the_run_of_a_trial_tune_never_recorded_is_ended_and_deleted(tmp_path):
    from versatil.sweep.tracking import child_runs, reopen_sweep_run
    from versatil.sweep.tracking.reconcile import UNRECORDED, end_unrecorded
    from versatil.sweep.vocab import tags

    storage, experiment_dir = tmp_path, tmp_path / "once-1"
    client, kept = open_child(storage, experiment_dir, "t_00000")
    kept.log_epoch(result(0))
    kept.finish("completed", "")
    _, lost = open_child(storage, experiment_dir, "t_00001")  # the head died under it
    lost.log_epoch(result(0))
    context = reopen_sweep_run(experiment_dir, default_tracking_uri(storage))
    # The resumed sweep's records: the first trial, and the lost one's configuration again.
    recorded = {"t_00000", "t_00002"}
    assert end_unrecorded(client, child_runs(client, context), recorded) == ["t_00001"]
    assert [r.info.run_id for r in child_runs(client, context)] == [kept.run_id]
    gone = client.get_run(lost.run_id)
    assert (gone.info.status, gone.info.lifecycle_stage) == ("KILLED", "deleted")
    assert gone.data.tags[tags.REASON] == UNRECORDED
    assert client.get_run(kept.run_id).info.status == "FINISHED"
    assert end_unrecorded(client, child_runs(client, context), recorded) == []  # idempotent
