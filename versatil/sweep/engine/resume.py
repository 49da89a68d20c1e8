"""Which experiment directory an invocation runs in: a new one, or an interrupted one resumed.

``--resume`` continues the latest run of the sweep Tune can restore. ``--auto-resume``
continues the latest run when it was interrupted (Tune can restore it and its end was never
logged), and otherwise starts a new one: the command a retried job runs, the same every time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TextIO

from versatil.errors import ConfigError
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.vocab import names

__all__ = ["choose_experiment_dir", "interrupted", "mark_ended"]


def interrupted(experiment_dir: Path) -> bool:
    """Whether Tune can restore ``experiment_dir`` and the sweep's end was never logged."""
    from ray import tune

    ended = (experiment_dir / names.SWEEP_ENDED).exists()
    return not ended and tune.Tuner.can_restore(str(experiment_dir))


def choose_experiment_dir(
    config: SweepConfig, resume: bool, auto_resume: bool, stream: TextIO | None = None
) -> tuple[Path, bool]:
    """The experiment directory to run in, and whether it is resumed.

    Args:
        config: The validated sweep.
        resume: ``--resume``: the latest restorable run, or a :class:`ConfigError`.
        auto_resume: ``--auto-resume``: the latest run if it was interrupted, else a new one.
        stream: Where ``--auto-resume`` says which it chose.

    Raises:
        ConfigError: With ``resume``, when no earlier run can be restored.
    """
    from ray import tune

    storage = config.storage_dir()
    earlier = names.experiment_dirs(storage, config.name)
    if resume:
        previous = [d for d in earlier if tune.Tuner.can_restore(str(d))]
        if not previous:
            raise ConfigError(
                f"--resume: no earlier run of sweep {config.name!r} under {storage} to resume; "
                "run it without --resume first"
            )
        return previous[-1], True
    if auto_resume and earlier and interrupted(earlier[-1]):
        if stream is not None:
            print(f"--auto-resume: resuming the interrupted run {earlier[-1]}", file=stream)
        return earlier[-1], True
    if auto_resume and stream is not None:
        print(f"--auto-resume: no interrupted run of {config.name!r}; starting one", file=stream)
    return storage / names.experiment_dir_name(config.name), False


def mark_ended(experiment_dir: Path, parent_run_id: str | None, trials: int) -> None:
    """Records that the sweep in ``experiment_dir`` ended and its end was logged."""
    ended = {"ended_at": time.time(), "parent_run_id": parent_run_id, "trials": trials}
    (experiment_dir / names.SWEEP_ENDED).write_text(json.dumps(ended) + "\n")
