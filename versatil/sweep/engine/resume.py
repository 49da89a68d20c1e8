"""Which experiment directory an invocation runs in: a new one, or an interrupted one resumed.

``--resume`` continues the latest run of the sweep Tune can restore. ``--auto-resume``
continues the latest run when it was interrupted (Tune can restore it and its end was never
logged), and otherwise starts a new one: the command a retried job runs, the same every time.
Both read the storage path, local or on object storage.
"""

from __future__ import annotations

import json
import time
from typing import TextIO

from versatil.errors import ConfigError
from versatil.sweep.storage import Storage
from versatil.sweep.vocab import names

__all__ = ["can_restore", "choose_experiment", "interrupted", "mark_ended"]


def can_restore(storage: Storage, name: str) -> bool:
    """Whether Tune can restore the experiment ``name`` under ``storage``."""
    from ray import tune

    arguments = storage.tune_arguments(name)
    return tune.Tuner.can_restore(
        arguments["storage_path"], storage_filesystem=arguments.get("storage_filesystem")
    )


def interrupted(storage: Storage, name: str) -> bool:
    """Whether Tune can restore ``name`` and the sweep's end was never logged."""
    return not storage.exists(name, names.SWEEP_ENDED) and can_restore(storage, name)


def choose_experiment(
    sweep: str,
    storage: Storage,
    resume: bool,
    auto_resume: bool,
    stream: TextIO | None = None,
) -> tuple[str, bool]:
    """The experiment directory's name to run in, and whether it is resumed.

    Args:
        sweep: The sweep's name.
        storage: Its storage path.
        resume: ``--resume``: the latest restorable run, or a :class:`ConfigError`.
        auto_resume: ``--auto-resume``: the latest run if it was interrupted, else a new one.
        stream: Where ``--auto-resume`` says which it chose.

    Raises:
        ConfigError: With ``resume``, when no earlier run can be restored.
    """
    earlier = names.experiment_names(storage.directories(), sweep)
    if resume:
        previous = [name for name in earlier if can_restore(storage, name)]
        if not previous:
            raise ConfigError(
                f"--resume: no earlier run of sweep {sweep!r} under "
                f"{storage.display()} to resume; run it without --resume first"
            )
        return previous[-1], True
    if auto_resume and earlier and interrupted(storage, earlier[-1]):
        if stream is not None:
            where = storage.display(earlier[-1])
            print(f"--auto-resume: resuming the interrupted run {where}", file=stream)
        return earlier[-1], True
    if auto_resume and stream is not None:
        print(f"--auto-resume: no interrupted run of {sweep!r}; starting one", file=stream)
    return names.experiment_dir_name(sweep), False


def mark_ended(storage: Storage, name: str, parent_run_id: str | None, trials: int) -> None:
    """Records that the sweep in experiment ``name`` ended and its end was logged."""
    ended = {"ended_at": time.time(), "parent_run_id": parent_run_id, "trials": trials}
    storage.write_text(json.dumps(ended) + "\n", name, names.SWEEP_ENDED)
