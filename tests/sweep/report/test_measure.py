"""The report counts each epoch once, however often a retried trial logged it."""


def test_the_report_counts_an_epoch_logged_twice_once(mlflow_sqlite):
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    from versatil.sweep.report.load import load_report

    uri = mlflow_sqlite
    client = MlflowClient(uri)
    experiment = client.create_experiment("retried")
    parent = client.create_run(
        experiment, tags={"versatil.objective": "val_loss", "versatil.mode": "min"}
    )
    child = client.create_run(
        experiment,
        tags={
            "mlflow.parentRunId": parent.info.run_id,
            "versatil.trial_id": "t1",
            "versatil.status": "completed",
        },
    )
    # Epoch 1 was logged, the trial failed and was retried from epoch 0's checkpoint.
    steps = [0, 1, 1, 2]
    metrics = [Metric("val_loss", 1.0 / (i + 1), i, step) for i, step in enumerate(steps)]
    client.log_batch(child.info.run_id, metrics=metrics)
    (row,) = load_report(uri, "retried").rows
    assert row.epochs == 3
