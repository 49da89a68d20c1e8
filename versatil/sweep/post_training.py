"""Which trials of a sweep are compressed to INT8: the sweep file's ``post_training`` section
and the pure functions that pick the trials.

``post_training: {int8: pareto}`` (or ``best``, ``none``, ``{top: K}``) asks the sweep to
compress its winners when it ends; ``python -m versatil.sweep compress`` takes the same
choice as ``--pareto``, ``--top K`` or ``--trial ID``. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Literal

import pydantic

from versatil.status import TrialStatus
from versatil.sweep.summary import TrialRow, pareto_front

__all__ = [
    "INT8_CHOICES",
    "PostTrainingSection",
    "Selection",
    "TopK",
    "finished",
    "select_pareto",
    "select_top",
    "select_trials",
]

INT8_CHOICES = ("pareto", "best", "none")
"""The words ``post_training.int8`` takes; ``{top: K}`` is the other form."""


class TopK(pydantic.BaseModel):
    """``{top: K}``: the K best trials by objective."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    top: int


def _int8_choice(value: Any) -> Any:
    """Checks ``post_training.int8`` before pydantic does, with one message for any mistake."""
    rule = f"use one of {', '.join(INT8_CHOICES)}, or {{top: K}} with an integer K >= 1"
    if isinstance(value, str):
        if value.strip().lower() in INT8_CHOICES:
            return value.strip().lower()
    elif isinstance(value, dict) and set(value) == {"top"}:
        k = value["top"]
        if isinstance(k, int) and not isinstance(k, bool) and k >= 1:
            return value
        raise ValueError(f"int8: top {k!r} is not a number of trials: {rule}")
    elif value is None or value is False:
        return "none"
    raise ValueError(f"int8: {value!r} is not a choice: {rule}")


class PostTrainingSection(pydantic.BaseModel):
    """What a sweep does with its trained trials once they all end."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    int8: Literal["pareto", "best", "none"] | TopK = pydantic.Field(
        "none",
        description="Compress to INT8 and log beside each trial: pareto, best, none or {top: K}.",
    )

    @pydantic.field_validator("int8", mode="before")
    @classmethod
    def _check_int8(cls, value: Any) -> Any:
        return _int8_choice(value)

    def selection(self) -> Selection | None:
        """The trials to compress, or ``None`` for ``none``."""
        if isinstance(self.int8, TopK):
            return Selection("top", k=self.int8.top)
        return {"pareto": Selection("pareto"), "best": Selection("top", k=1)}.get(self.int8)


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which trials to compress.

    Attributes:
        kind: ``pareto`` (non-dominated in objective vs samples_per_sec), ``top`` (the
            ``k`` best by objective) or ``trial`` (the one ``trial_id``).
        k: How many, for ``top``.
        trial_id: The trial, for ``trial``.
    """

    kind: Literal["pareto", "top", "trial"]
    k: int | None = None
    trial_id: str | None = None

    def describe(self) -> str:
        """How the selection reads in the command's output."""
        if self.kind == "pareto":
            return "the Pareto front of objective vs samples_per_sec"
        if self.kind == "top":
            return "the best trial" if self.k == 1 else f"the {self.k} best trials"
        return f"trial {self.trial_id}"


def finished(rows: Sequence[TrialRow]) -> list[TrialRow]:
    """The trials that trained to a finite objective (completed, or stopped by a scheduler)."""
    return [
        r
        for r in rows
        if TrialStatus(r.status).ranked and r.objective is not None and math.isfinite(r.objective)
    ]


def select_pareto(rows: Sequence[TrialRow], mode: str) -> list[TrialRow]:
    """The finished trials no other finished trial beats on both objective and throughput.

    This is the front the report marks (``*`` and ``P``): a trial stays unless another is at
    least as good on the objective and on ``samples_per_sec``, and better on one of them.
    """
    front = pareto_front(finished(rows), mode)
    return [r for r in finished(rows) if r.trial_id in front]


def select_top(rows: Sequence[TrialRow], mode: str, k: int) -> list[TrialRow]:
    """The ``k`` best finished trials by objective; a tie goes to higher ``samples_per_sec``."""
    sign = 1.0 if mode == "min" else -1.0

    def key(row: TrialRow) -> tuple[float, float, str]:
        throughput = row.metrics.get("samples_per_sec")
        speed = float(throughput) if throughput is not None else -math.inf
        return sign * float(row.objective), -speed, row.trial_id

    return sorted(finished(rows), key=key)[:k]


def select_trials(rows: Sequence[TrialRow], mode: str, selection: Selection) -> list[TrialRow]:
    """The trials ``selection`` picks, best objective first (one trial for ``trial``)."""
    if selection.kind == "trial":
        return [r for r in finished(rows) if r.trial_id == selection.trial_id]
    if selection.kind == "top":
        return select_top(rows, mode, selection.k or 1)
    chosen = {r.trial_id for r in select_pareto(rows, mode)}
    return [r for r in select_top(rows, mode, len(rows)) if r.trial_id in chosen]
