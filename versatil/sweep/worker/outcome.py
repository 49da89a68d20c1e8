"""What a trial reports of its fit, and where a restored trial resumes: one path for all.

Single-worker trials (:mod:`versatil.sweep.worker.trial`) and data-parallel ones
(:mod:`versatil.sweep.worker.distributed`) both:

- resume from :func:`resume_point`: Tune's checkpoint of the trial, or the newest earlier
  one that can be read when it cannot (``checkpoint/unreadable_skipped`` in every epoch's
  result then counts the ones passed over);
- report each epoch as :func:`epoch_report` builds it (diverged, completed or running;
  failed when the module did not log an objective), a
  :class:`~versatil.sweep.vocab.report.TrialReport` Tune receives as its ``to_dict()``;
- end with the one result :func:`ending_result` makes of what the fit raised: bad task
  params or a setting not in effect (``failed``, with the message), settings the device
  cannot run (``infeasible``), out of memory or a full disk (``failed``, with that
  reason; a full disk stops the sweep). Anything
  else is raised, and Tune retries the trial as ``max_failures`` allows.

A data-parallel rank cannot report its ending itself: the other ranks may be waiting for
it in a collective. It raises :class:`TrialEnded` instead, which ends every rank's fit;
the trial's coordinator finds it with :func:`rank_ending` and reports it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from versatil.errors import ConfigError, no_space_left
from versatil.status import TrialStatus
from versatil.sweep.plan import TrialPlan
from versatil.sweep.storage import CheckpointMirror
from versatil.sweep.vocab.keys import UNREADABLE_SKIPPED
from versatil.sweep.vocab.report import TrialReport
from versatil.sweep.worker.reports import (
    end_result,
    epoch_result,
    missing_objective_report,
    out_of_memory_reason,
    with_process_facts,
)
from versatil.sweep.worker.restore import choose_checkpoint

__all__ = [
    "UNREADABLE_SKIPPED",
    "Resume",
    "TrialEnded",
    "ending_result",
    "epoch_report",
    "rank_ending",
    "resume_point",
]


@dataclasses.dataclass(frozen=True)
class Resume:
    """Where a trial's fit goes on from.

    Attributes:
        checkpoint_dir: The trial's checkpoint directory to resume from, the newest one
            whose ``last.ckpt`` can be read; ``None``: the fit starts over.
        skipped: The unreadable newer checkpoints passed over, each with why.
        remote: The chosen checkpoint's path on object storage, when it is there
            (``checkpoint_dir`` is then its copy in this node's cache).
    """

    checkpoint_dir: Path | None = None
    skipped: tuple[str, ...] = ()
    remote: str | None = None

    def annotate(self, report: TrialReport) -> TrialReport:
        """``report`` with how many unreadable checkpoints were skipped, when any were."""
        if not self.skipped:
            return report
        return dataclasses.replace(report, unreadable_skipped=len(self.skipped))


def resume_point(policy: str) -> Resume:
    """Where this Tune trial resumes: its checkpoint, else as ``policy`` says.

    Called in the trial's own process, where Tune hands over the checkpoint it restores
    (a retry, ``--resume`` or a PBT exploit); see :mod:`versatil.sweep.worker.restore`.

    Args:
        policy: The sweep's ``on_unreadable_checkpoint``.

    Raises:
        ConfigError: with ``policy: fail`` and an unreadable newest checkpoint.
    """
    from ray import tune

    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return Resume()
    mirror = CheckpointMirror.of(checkpoint.filesystem, checkpoint.path)
    if mirror is None:
        return Resume(*choose_checkpoint(Path(checkpoint.path), policy))
    chosen, skipped = choose_checkpoint(mirror.newest, policy, fetch=mirror.fetch)
    return Resume(chosen, skipped, mirror.remote(chosen) if chosen is not None else None)


def epoch_report(
    plan: TrialPlan,
    trainer: Any,
    metrics: dict[str, float],
    fit_start: float,
    resumed: bool,
) -> tuple[TrialReport, bool]:
    """The result to report after an epoch, and whether its checkpoint goes with it.

    An epoch without the sweep's objectives fails the trial: the trainer is told to
    stop, and the result comes without a checkpoint.

    Args:
        plan: The trial's plan (its objectives).
        trainer: The Lightning trainer at the epoch's end.
        metrics: The epoch's metrics, versatil's own included.
        fit_start: ``time.perf_counter()`` when the fit began.
        resumed: Whether the fit went on from a checkpoint.
    """
    failed = missing_objective_report(plan, metrics, trainer.callback_metrics)
    if failed is not None:
        trainer.should_stop = True
        return with_process_facts(failed), False
    return epoch_result(trainer, metrics, fit_start, resumed), True


def ending_result(plan: TrialPlan, error: BaseException) -> TrialReport | None:
    """The one result that ends a trial whose fit raised ``error``; ``None``: raise it.

    A problem every trial meets the same way (an endless epoch with no step budget, a
    full disk: ``no space left on ...``) ends it ``failed`` and stops the sweep. The trial
    ends on bad task params (:class:`~versatil.errors.ConfigError`), a setting observed
    not in effect, settings the device cannot run, and running out of
    memory: a retry would meet each the same way. Anything else may pass on a retry.

    Args:
        plan: The trial's plan (its objectives, whose worst values the result carries).
        error: What the fit, or the trial's setup before it, raised.
    """
    from versatil.training.budget import EveryTrialError
    from versatil.training.fit import InfeasibleError
    from versatil.training.in_effect import SettingsNotInEffectError

    full = no_space_left(error, plan.storage_path)
    if isinstance(error, EveryTrialError) or full is not None:
        # Every other trial would meet it (a full disk: they write to the same storage
        # path): the sweep stops; a retry is not spent on it, nor is its traceback kept.
        report = end_result(plan, TrialStatus.FAILED, full or str(error))
        return with_process_facts(dataclasses.replace(report, stops_sweep=True))
    if isinstance(error, ConfigError | SettingsNotInEffectError):
        status, reason = TrialStatus.FAILED, str(error)
    elif isinstance(error, InfeasibleError):
        status, reason = TrialStatus.INFEASIBLE, error.reason
    else:
        # torch.OutOfMemoryError and the CPU allocator's error are RuntimeErrors.
        oom = out_of_memory_reason(error) if isinstance(error, RuntimeError | MemoryError) else None
        if oom is None:
            return None
        status, reason = TrialStatus.FAILED, oom
        error.__traceback__ = None  # its frames hold the fit's tensors
        _release_memory()
    return with_process_facts(end_result(plan, status, reason))


class TrialEnded(Exception):
    """Raised by a data-parallel rank whose fit ended the trial; carries the result.

    Args:
        result: The result that ends the trial (see :func:`ending_result`).

    Attributes:
        result: The result that ends the trial.
    """

    def __init__(self, result: TrialReport) -> None:
        super().__init__(f"{result.status}: {result.reason}")
        self.result = result

    def __reduce__(self) -> tuple[type, tuple[TrialReport]]:
        # Ray pickles a rank's exception to the coordinator.
        return (type(self), (self.result,))


def rank_ending(error: BaseException) -> TrialReport | None:
    """The result a data-parallel rank ended the trial with, from Ray Train's error.

    When one rank ran out of memory, the others may fail only because it left their
    collectives; so any rank's :class:`TrialEnded` counts, the lowest rank's first.

    Args:
        error: What ``TorchTrainer.fit`` raised: a ``WorkerGroupError`` maps each failed
            rank to its exception.

    Returns:
        That rank's result, or ``None`` when no rank ended the trial (raise ``error``).
    """
    failures: dict[int, BaseException] = getattr(error, "worker_failures", None) or {}
    for _rank, failure in sorted(failures.items()):
        if isinstance(failure, TrialEnded):
            return failure.result
    return None


def _release_memory() -> None:
    """Returns what a failed fit held, so that the worker's next trial starts clean."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
