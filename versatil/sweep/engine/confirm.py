"""The end of a sweep: its candidates re-timed on one device, paired and interleaved.

The re-timing runs as one Ray task with a trial's CPUs and its GPUs rounded up to whole
ones (trials with a share of a GPU timed each other), so on a cluster every candidate
trains on the same node and device, one at a time, while no trial runs and nothing else
holds that GPU. More candidates than ``confirm.max_candidates`` are re-timed in several
groups, each with the reference first, one group after the other in that one task. Its
rounds come back as one document (:mod:`~versatil.sweep.results.confirmation`), which
decides the verdict and is logged to MLflow.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, TextIO

from versatil.sweep.engine.stops import get_or_cancel
from versatil.sweep.plan import Plan
from versatil.sweep.results.confirmation import Candidate, candidates, groups, should_confirm
from versatil.sweep.results.judgement import Judgement
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.storage import checkpoint_ref

__all__ = ["confirm_candidates", "confirm_or_explain", "in_contention"]


def in_contention(plan: Plan, rows: Sequence[TrialRow], judgement: Judgement) -> list[Candidate]:
    """The candidates to re-time, or none when the sweep's settings say not to."""
    section = plan.retiming
    on = section.enabled == "on"  # asked for: the Pareto set's slower settings too
    verdict, front = judgement.verdict, set(judgement.marks)
    found = candidates(verdict, rows, front, section.max_candidates, slower=on)
    return found if should_confirm(verdict, found, section.enabled) else []


def _retime_task(grouped: list[list[tuple[str, str]]], options: dict[str, Any]) -> dict[str, Any]:
    """Runs in a Ray worker: each group's rounds, as plain values (the driver imports no torch).

    The groups are re-timed one after the other, on this worker's device.
    """
    from versatil.cli_common import quiet_libraries
    from versatil.sweep.storage import local_checkpoint
    from versatil.training.retime import retime

    quiet_libraries()  # after Lightning's import (retime's), which sets its loggers' levels
    # A checkpoint on object storage comes by its URI; it is fetched on this node, once.
    local: dict[str, str] = {}
    rounds = []
    for group in grouped:
        for _, ref in group:
            local.setdefault(ref, str(local_checkpoint(ref)))
        rounds.append(retime([(label, local[ref]) for label, ref in group], **options).as_dict())
    return {"groups": rounds}


def _announce(
    found: Sequence[Candidate], grouped: Sequence[Sequence[Candidate]], rounds: int
) -> str:
    """The line that says what the re-timing times."""
    names = ", ".join(c.label for c in found)
    line = f"confirm: re-timing {len(found)} settings ({names}) in {rounds} paired, interleaved "
    line += "rounds on one device"
    if len(grouped) > 1:
        size = max(len(g) for g in grouped)
        line += f", in {len(grouped)} groups of at most {size}, each with {found[0].label}"
    return line


def confirm_candidates(
    plan: Plan, found: Sequence[Candidate], stream: TextIO | None = None
) -> dict[str, Any]:
    """Re-times ``found`` (the reference first) in one Ray task; returns the rounds' document.

    More than ``confirm.max_candidates`` are re-timed in groups of that size, each with the
    reference first (:func:`~versatil.sweep.results.confirmation.groups`), one after the
    other. Ray must be connected. The task takes one trial's CPUs (``resources.cpu``), so
    torch computes with the threads a trial had, and whole GPUs (the plan's
    ``resources.retime``).

    Returns:
        ``contenders`` (every candidate, the reference first), ``groups`` (each group's
        rounds: :class:`~versatil.training.retime.Retimed` as plain values), ``wall_s``
        (the task's seconds, start to end).
    """
    import ray

    section = plan.retiming
    grouped = groups(found, section.max_candidates)
    if stream is not None:
        print(_announce(found, grouped, section.rounds), file=stream, flush=True)
    task = ray.remote(**plan.resources.retime, max_retries=0)(_retime_task)
    options = {"rounds": section.rounds, "round_s": section.round_s, "seed": section.seed}
    refs = [[(c.label, checkpoint_ref(c.checkpoint)) for c in group] for group in grouped]
    start = time.perf_counter()
    rounds = get_or_cancel(task.remote(refs, options))
    wall_s = time.perf_counter() - start
    return {"contenders": [c.as_dict() for c in found], **rounds, "wall_s": wall_s}


def confirm_or_explain(
    plan: Plan, found: Sequence[Candidate], stream: TextIO
) -> dict[str, Any] | None:
    """:func:`confirm_candidates`, or ``None`` (said on ``stream``) when the re-timing failed.

    The sweep's own verdict then stands, from its trials' timing.
    """
    import ray

    try:
        return confirm_candidates(plan, found, stream)
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
