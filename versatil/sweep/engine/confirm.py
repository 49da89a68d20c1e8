"""The end of a sweep: its candidates re-timed on one device, paired and interleaved.

The re-timing runs as one Ray task with a trial's CPUs and its GPUs rounded up to whole
ones (trials with a share of a GPU timed each other), so on a cluster every candidate
trains on the same node and device, one at a time, while no trial runs and nothing else
holds that GPU. Its rounds come back as one document
(:mod:`~versatil.sweep.results.confirmation`), which decides the verdict and is logged to
MLflow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TextIO

from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.results.confirmation import Candidate, candidates, should_confirm
from versatil.sweep.results.judgement import Judgement
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.storage import checkpoint_ref

__all__ = ["confirm_candidates", "confirm_or_explain", "plan", "retime_resources"]


def plan(config: SweepConfig, rows: Sequence[TrialRow], judgement: Judgement) -> list[Candidate]:
    """The candidates to re-time, or none when the sweep's settings say not to."""
    found = candidates(judgement.verdict, rows, set(judgement.marks), config.confirm.max_candidates)
    return found if should_confirm(judgement.verdict, found, config.confirm.enabled) else []


def retime_resources(config: SweepConfig) -> dict[str, float]:
    """The re-timing task's Ray resources: a trial's CPUs, and its GPUs rounded up to whole.

    Trials with a fraction of a GPU timed each other on it (their ``throughput_shared``);
    the re-timing holds whole GPUs, so no trial's task shares them while it times.
    """
    resources = config.resources
    gpus = resources.gpus_for(config.trainer.accelerator)
    return {"num_cpus": resources.cpu, "num_gpus": math.ceil(gpus) if gpus > 0 else 0}


def _retime_task(contenders: list[tuple[str, str]], options: dict[str, Any]) -> dict[str, Any]:
    """Runs in a Ray worker: the rounds, as plain values (the driver imports no torch)."""
    from versatil.cli_common import quiet_libraries
    from versatil.sweep.storage import local_checkpoint
    from versatil.training.retime import retime

    quiet_libraries()  # after Lightning's import (retime's), which sets its loggers' levels
    # A checkpoint on object storage comes by its URI; it is fetched on this node.
    local = [(label, str(local_checkpoint(ref))) for label, ref in contenders]
    return retime(local, **options).as_dict()


def confirm_candidates(
    config: SweepConfig, found: Sequence[Candidate], stream: TextIO | None = None
) -> dict[str, Any]:
    """Re-times ``found`` (the reference first) in one Ray task; returns the rounds' document.

    Ray must be connected. The task takes one trial's CPUs (``resources.cpu``), so torch
    computes with the threads a trial had, and whole GPUs (:func:`retime_resources`).
    """
    import ray

    section = config.confirm
    if stream is not None:
        names = ", ".join(c.label for c in found)
        print(
            f"confirm: re-timing {len(found)} settings ({names}) in {section.rounds} paired, "
            "interleaved rounds on one device",
            file=stream,
            flush=True,
        )
    task = ray.remote(**retime_resources(config), max_retries=0)(_retime_task)
    options = {"rounds": section.rounds, "round_s": section.round_s, "seed": config.trainer.seed}
    contenders = [(c.label, checkpoint_ref(c.checkpoint)) for c in found]
    rounds = ray.get(task.remote(contenders, options))
    return {"contenders": [c.as_dict() for c in found], **rounds}


def confirm_or_explain(
    config: SweepConfig, found: Sequence[Candidate], stream: TextIO
) -> dict[str, Any] | None:
    """:func:`confirm_candidates`, or ``None`` (said on ``stream``) when the re-timing failed.

    The sweep's own verdict then stands, from its trials' timing.
    """
    import ray

    try:
        return confirm_candidates(config, found, stream)
    except (ray.exceptions.RayError, OSError, ValueError) as error:
        lines = str(error).strip().splitlines()
        reason = lines[-1] if lines else type(error).__name__
        print(
            f"confirm: the re-timing failed ({reason[:300]}); the verdict rests on the "
            "trials' own timing",
            file=stream,
            flush=True,
        )
        return None
