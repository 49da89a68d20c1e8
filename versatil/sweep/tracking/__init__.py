"""MLflow: one parent run per sweep invocation, one child run per trial.

All logging happens in the driver: workers never import MLflow or talk to the tracking
server, so a worker's warm-up is torch and Lightning alone and an epoch's report costs the
training nothing. The parent run is opened while Ray, Tune and the first workers start (a
``--resume`` reopens the same parent). A trial's child run, tagged ``mlflow.parentRunId``
and ``versatil.trial_id``, is opened at its first result; a retried, restored or resumed
trial finds its run by that tag and continues it, so a trial never has two runs.

Tune's own records in the experiment directory are the source of truth; MLflow is their
projection, each (trial, metric, epoch) logged once. What a killed driver or a store
outage left out is backfilled on ``--resume``, at the end of a sweep and by
``python -m versatil.sweep sync NAME``.

Modules: :mod:`~.tags` (tag names), :mod:`~.store` (the store and the parent run),
:mod:`~.child_run` (a trial's run), :mod:`~.live` (the Tune callback and its queue),
:mod:`~.reconcile` (backfill and the end of a sweep), :mod:`~.registry`.
"""

from versatil.sweep.tracking.child_run import ChildRun, log_checkpoint, trial_params
from versatil.sweep.tracking.live import SweepTracker
from versatil.sweep.tracking.reconcile import (
    SweepEnd,
    TrackingGap,
    backfill,
    close_sweep,
    log_end,
)
from versatil.sweep.tracking.store import (
    PARENT_FILE,
    TrackingContext,
    TrackingUnavailable,
    check_server,
    child_runs,
    default_tracking_uri,
    find_child_run,
    open_sweep_run,
    reopen_sweep_run,
    runs_by_trial,
    tracking_store,
)

__all__ = [
    "PARENT_FILE",
    "ChildRun",
    "SweepEnd",
    "SweepTracker",
    "TrackingContext",
    "TrackingGap",
    "TrackingUnavailable",
    "backfill",
    "check_server",
    "child_runs",
    "close_sweep",
    "default_tracking_uri",
    "find_child_run",
    "log_checkpoint",
    "log_end",
    "open_sweep_run",
    "reopen_sweep_run",
    "runs_by_trial",
    "tracking_store",
    "trial_params",
]
