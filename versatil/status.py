"""The status of a trial (or of one training run): one enum, used by every module."""

from __future__ import annotations

import enum

__all__ = ["MLFLOW_FINISHED", "MLFLOW_KILLED", "MLFLOW_RUNNING", "TrialStatus"]

MLFLOW_RUNNING = "RUNNING"
"""MLflow's status of a run still open: its trial has not ended (or its driver was lost)."""

MLFLOW_FINISHED = "FINISHED"
"""MLflow's status of a run that ended well: a completed trial, an infeasible one, an INT8 run."""

MLFLOW_KILLED = "KILLED"
"""MLflow's status of a run stopped before its end (a trial stopped; a sweep interrupted)."""


class TrialStatus(enum.StrEnum):
    """Where a trial stands; the value is what results, tables and MLflow tags show."""

    RUNNING = "running"
    COMPLETED = "completed"
    STOPPED = "stopped"  # by a scheduler (ASHA), or the sweep stopped before it ran
    DIVERGED = "diverged"  # the training loss stopped being finite
    INFEASIBLE = "infeasible"  # the settings cannot run on the worker's device
    FAILED = "failed"

    @property
    def ranked(self) -> bool:
        """Whether the trial trained, so its objective competes for best."""
        return self in (TrialStatus.COMPLETED, TrialStatus.STOPPED)

    @property
    def mlflow_status(self) -> str:
        """The MLflow run status a trial's run ends with."""
        return {
            TrialStatus.COMPLETED: MLFLOW_FINISHED,
            TrialStatus.INFEASIBLE: MLFLOW_FINISHED,
            TrialStatus.STOPPED: MLFLOW_KILLED,
        }.get(self, "FAILED")
