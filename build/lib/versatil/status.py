"""The status of a trial (or of one training run): one enum, used by every module."""

from __future__ import annotations

import enum

__all__ = ["TrialStatus"]


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
            TrialStatus.COMPLETED: "FINISHED",
            TrialStatus.INFEASIBLE: "FINISHED",
            TrialStatus.STOPPED: "KILLED",
        }.get(self, "FAILED")
