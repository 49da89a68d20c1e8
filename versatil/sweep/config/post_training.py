"""The sweep file's ``post_training`` section: which trials a sweep compresses to INT8.

``post_training: {int8: pareto}`` (or ``best``, ``none``, ``{top: K}``) asks the sweep to
compress its winners when it ends; ``python -m versatil.sweep compress`` takes the same
choice as ``--pareto``, ``--top K`` or ``--trial ID``. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import pydantic

__all__ = ["INT8_CHOICES", "PostTrainingSection", "Selection", "TopK"]

INT8_CHOICES = ("pareto", "best", "none")
"""The words ``post_training.int8`` takes; ``{top: K}`` is the other form."""


class TopK(pydantic.BaseModel):
    """``{top: K}``: the K best trials by objective."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    top: int = pydantic.Field(
        description="K: how many trials to compress, the best by objective; at least 1."
    )


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
