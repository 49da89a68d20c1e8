"""ASHA and PBT that keep the reference: its trials train their whole budget, as they are.

Every setting is compared with the reference (eager fp32, see
:mod:`versatil.sweep.config.reference`), so a sweep needs it trained to the end. The
sweep's first configuration with the reference's settings is *kept*: ASHA's decision to
stop one of its trials early becomes ``CONTINUE``, and PBT never puts one in the lower
quantile it exploits (the trial keeps its weights and its params; the others may still
copy it). A configuration is kept once per seed: with replicates, all its seeds' trials
are. Every other trial is scheduled as Tune's own scheduler would.

Ray is imported here: :func:`~versatil.sweep.engine.tune_objects.make_scheduler` imports
this module only for a sweep with a scheduler.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import AsyncHyperBandScheduler, PopulationBasedTraining, TrialScheduler

from versatil.sweep.vocab.keys import SEED

__all__ = ["KeepReferenceASHA", "KeepReferencePBT", "KeepsReference"]


class KeepsReference:
    """What a scheduler needs to keep the reference: which trials are kept.

    Mixed in before a Tune scheduler, whose methods it extends. The first trial added
    whose config holds the reference's settings fixes the kept configuration (its config
    without the seed); every trial with that configuration is kept.

    Args:
        reference: The reference's value on each settings axis of the space; ``None``
            keeps no trial (a sweep of one setting, whose trials are all the reference).
        *args: The scheduler's own.
        **kwargs: The scheduler's own.
    """

    def __init__(self, *args: Any, reference: Mapping[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._reference = dict(reference) if reference else None
        self._kept_configuration: str | None = None
        self._kept: set[str] = set()

    def keeps(self, trial: Trial) -> bool:
        """Whether ``trial`` is one of the reference's kept trials."""
        return trial.trial_id in self._kept

    def _note(self, trial: Trial) -> None:
        """Keeps ``trial`` when it is the kept configuration (the first reference one)."""
        if self._reference is None:
            return
        config = {k: v for k, v in trial.config.items() if k != SEED}
        if any(config.get(name) != value for name, value in self._reference.items()):
            return
        key = json.dumps(config, sort_keys=True, default=str)
        if self._kept_configuration is None:
            self._kept_configuration = key
        if key == self._kept_configuration:
            self._kept.add(trial.trial_id)

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        """Notes whether ``trial`` is kept, then adds it as the scheduler does."""
        self._note(trial)
        super().on_trial_add(tune_controller, trial)  # type: ignore[misc]

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        """The scheduler's decision, but ``CONTINUE`` where it would stop a kept trial.

        The scheduler still sees the result (ASHA records it at its rung, for the others).
        A kept trial ends when its own budget ends.
        """
        decision = super().on_trial_result(tune_controller, trial, result)  # type: ignore[misc]
        if decision == TrialScheduler.STOP and self.keeps(trial):
            return TrialScheduler.CONTINUE
        return decision


class KeepReferenceASHA(KeepsReference, AsyncHyperBandScheduler):
    """Tune's ASHA, never stopping the reference's kept trials early."""


class KeepReferencePBT(KeepsReference, PopulationBasedTraining):
    """Tune's PBT, never exploiting the reference's kept trials (nor mutating their params)."""

    def _quantiles(self) -> tuple[list[Trial], list[Trial]]:
        """PBT's lower and upper quantiles, the kept trials left out of the lower one.

        The lower quantile is the one PBT exploits: its trials copy an upper trial's
        checkpoint and perturbed params.
        """
        lower, upper = super()._quantiles()
        return [t for t in lower if not self.keeps(t)], upper
