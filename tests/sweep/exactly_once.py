"""Checks a sweep's MLflow runs against Tune's records: every trial and every epoch once."""

import dataclasses
from collections import Counter

from mlflow.tracking import MlflowClient

from versatil.sweep.results.records import read_trials
from versatil.sweep.tracking import TrackingContext, child_runs, reopen_sweep_run
from versatil.sweep.vocab import tags

METRICS = ("val_loss", "samples_per_sec")


@dataclasses.dataclass
class Tally:
    """Trials and epochs: in Tune's records, and lost or duplicated in MLflow."""

    trials: int
    trials_lost: int
    trials_duplicated: int
    epochs: int
    epochs_lost: int
    epochs_duplicated: int
    runs_running: int
    parent_status: str


def tally(experiment_dir, tracking_uri=None) -> Tally:
    """Compares the runs of the sweep invocation in ``experiment_dir`` with Tune's records."""
    context: TrackingContext = reopen_sweep_run(experiment_dir, tracking_uri)
    client = MlflowClient(context.tracking_uri)
    records = {r.trial_id: r for r in read_trials(experiment_dir)}
    runs = child_runs(client, context)
    per_trial = Counter(run.data.tags[tags.TRIAL_ID] for run in runs)
    epochs = lost = duplicated = 0
    for run in runs:
        record = records.get(run.data.tags[tags.TRIAL_ID])
        recorded = set(record.epochs()) if record else set()
        epochs += len(recorded)
        for metric in METRICS:
            steps = Counter(m.step for m in client.get_metric_history(run.info.run_id, metric))
            lost += len(recorded - set(steps))
            duplicated += sum(n - 1 for n in steps.values())
    return Tally(
        trials=len(records),
        trials_lost=len(set(records) - set(per_trial)),
        trials_duplicated=sum(n - 1 for n in per_trial.values()),
        epochs=epochs,
        epochs_lost=lost,
        epochs_duplicated=duplicated,
        runs_running=sum(run.info.status == "RUNNING" for run in runs),
        parent_status=client.get_run(context.parent_run_id).info.status,
    )


def assert_exactly_once(experiment_dir, tracking_uri=None) -> Tally:
    """Every trial one run, every recorded epoch once per metric, nothing RUNNING."""
    counted = tally(experiment_dir, tracking_uri)
    assert counted.trials > 0 and counted.epochs > 0, counted
    assert counted.trials_lost == counted.trials_duplicated == 0, counted
    assert counted.epochs_lost == counted.epochs_duplicated == 0, counted
    assert counted.runs_running == 0 and counted.parent_status == "FINISHED", counted
    return counted
