"""An epoch reaches a trial's MLflow run once, however often it is reported."""

from mlflow.tracking import MlflowClient

from versatil.sweep.tracking import ChildRun, default_tracking_uri, open_sweep_run


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
