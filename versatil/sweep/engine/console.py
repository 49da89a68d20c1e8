"""The sweep's console while it runs: a line per epoch and per trial, and Tune's own kept off."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from typing import Any, TextIO

from versatil.errors import no_space_left
from versatil.status import TrialStatus
from versatil.sweep.plan import Plan
from versatil.sweep.vocab.report import TrialReport
from versatil.training.metric_names import DEVICE_TRIALS_MAX, SAMPLES_PER_SEC

__all__ = ["ProgressPrinter", "tune_console_quiet"]


class ProgressPrinter:
    """Prints one line per reported epoch and per finished trial (a Tune callback).

    A line says how far its trial is: ``epoch 2``, or ``step 40/60`` under a step budget.

    A trial's last line says how far the sweep is: the trials ended of those planned,
    and an estimate of the time left (the mean time per ended trial so far, times those
    left: rough while few have ended). A resumed sweep counts the trials its earlier runs
    ended (:attr:`ended_before`) among those ended, not in the time per trial.
    """

    def __init__(self, plan: Plan, stream: TextIO | None = None) -> None:
        from ray import tune

        class _Callback(tune.Callback):
            def on_trial_result(cb, iteration, trials, trial, result, **info):
                self._line(trial, result)

            def on_trial_error(cb, iteration, trials, trial, **info):
                self._print(f"{trial.trial_id} failed: see {trial.path}")

        self.callback = _Callback()
        self.axis_names = plan.axis_names
        self.objectives = plan.objectives.objectives
        self.stream = stream or sys.stdout  # looked up now: a redirected stdout counts
        self.start = time.perf_counter()
        self.planned = plan.planned_trials
        self.steps = plan.budget.amount if plan.budget.unit == "steps" else None
        self.ended: set[str] = set()
        self.ended_before = 0
        """Trials an earlier run of a resumed sweep ended (they count as ended, untimed)."""

    def _print(self, text: str) -> None:
        print(f"[{time.perf_counter() - self.start:6.1f}s] {text}", file=self.stream, flush=True)

    def _line(self, trial: Any, result: dict[str, Any]) -> None:
        axes = " ".join(f"{k}={trial.config.get(k)}" for k in self.axis_names)
        report = TrialReport.from_dict(result)
        status = report.status or ""
        if status in (TrialStatus.INFEASIBLE, TrialStatus.FAILED):
            self._print(f"{trial.trial_id} {status}: {report.reason} ({axes}){self._end(trial)}")
            return
        measured = report.metrics
        where = f"epoch {(report.epoch or 0) + 1}"
        if self.steps is not None and report.step is not None:
            where = f"step {report.step}/{self.steps}"  # a step budget: how far along it
        values = " ".join(  # top-level keys, as Tune reads the objectives
            f"{metric}={result.get(metric, 0):.4g}"
            for metric, _ in self.objectives
            if metric != SAMPLES_PER_SEC
        )
        speed = f"samples/s={measured.get(SAMPLES_PER_SEC, 0):.0f}"
        if measured.get("throughput_too_short") and status != TrialStatus.RUNNING:
            windows = int(measured.get("throughput_windows", 0))
            window_s = measured.get("throughput_window_s", 0)
            speed += f" (too short to time: {windows} windows of {window_s:g} s)"
        if measured.get(DEVICE_TRIALS_MAX, 1) > 1:
            speed += f" (GPU shared by {measured[DEVICE_TRIALS_MAX]:g} trials)"
        ending = self._end(trial) if status and status != TrialStatus.RUNNING else ""
        self._print(f"{trial.trial_id} {where} {values} {speed} {status} ({axes}){ending}")

    def _end(self, trial: Any) -> str:
        """`` [3/16 trials ended, about 40 s left]`` for a trial's last line."""
        self.ended.add(trial.trial_id)
        done = self.ended_before + len(self.ended)
        planned = max(self.planned, done)
        if done >= planned:
            return f" [{done}/{planned} trials ended]"
        left = (time.perf_counter() - self.start) / len(self.ended) * (planned - done)
        return f" [{done}/{planned} trials ended, about {left:.0f} s left]"


@contextlib.contextmanager
def tune_console_quiet() -> Any:
    """Keeps Tune's own console output off while the sweep runs.

    At ``verbose=0`` Tune's default output engine still prints a "Configuration for
    experiment" box and "View detailed results here"; the sweep prints its own progress,
    summary and paths. ``RAY_AIR_NEW_OUTPUT=0`` selects Tune's other engine, which prints
    nothing at ``verbose=0``. Set for the fit only, unless the environment already says.

    Tune's warning that a restored trial's result file is not in storage yet is dropped:
    it comes with every restore (a retry, a PBT exploit) before the driver's first upload,
    and Tune keeps appending to the driver's own copy, which is then uploaded whole.
    Its error that its state could not be saved on a full disk is one line, not pyarrow's
    traceback: the sweep stops at that disk with its own message.
    """
    key = "RAY_AIR_NEW_OUTPUT"
    tune_logs = logging.getLogger("ray.tune.logger.logger")
    tune_logs.addFilter(_not_uploaded_yet)
    state_logs = logging.getLogger("ray.tune.execution.experiment_state")
    state_logs.addFilter(_full_disk_in_one_line)
    set_here = key not in os.environ
    if set_here:
        os.environ[key] = "0"
    try:
        yield
    finally:
        tune_logs.removeFilter(_not_uploaded_yet)
        state_logs.removeFilter(_full_disk_in_one_line)
        if set_here:
            os.environ.pop(key, None)


def _not_uploaded_yet(record: logging.LogRecord) -> bool:
    """False for Tune's "Remote file not found" warning on restoring a trial's logs."""
    return not record.getMessage().startswith("Remote file not found:")


def _full_disk_in_one_line(record: logging.LogRecord) -> bool:
    """Makes a log record whose exception is a full disk one line, its traceback left out."""
    error = record.exc_info[1] if record.exc_info else None
    full = no_space_left(error, "the storage path") if error is not None else None
    if full is not None:
        record.msg, record.args = f"{record.getMessage().rstrip(': ')}: {full}", None
        record.exc_info = record.exc_text = None
    return True
