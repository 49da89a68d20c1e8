"""The MLflow tags of a sweep's runs, read back as typed records with explicit defaults.

Every reader of a run's tags (the report, ``confirm``, ``compress``, the reconciler) reads
them here, so a tag missing from an older run, or a value no version wrote, has one
answer: the defaults below, or a :class:`~versatil.errors.ConfigError` naming the tag,
its value and the valid choices. The names are :mod:`versatil.sweep.vocab.tags`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from versatil.errors import ConfigError
from versatil.status import TrialStatus
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.direction import Direction

__all__ = ["DEFAULT_TOLERANCE", "Int8Tags", "SweepTags", "TrialTags"]

DEFAULT_TOLERANCE = 0.01
"""The verdict's tolerance of a sweep run that recorded none (the sweep file's default)."""


def _direction(name: str, value: str) -> Direction:
    try:
        return Direction(value)
    except ValueError:
        raise ConfigError(
            f"MLflow tag {name}: {value!r} is not an objective mode; valid: "
            f"{', '.join(d.value for d in Direction)}"
        ) from None


def _json(held: Mapping[str, str], name: str, default: Any) -> Any:
    text = held.get(name)
    if text is None:
        return default
    try:
        return json.loads(text)
    except ValueError:
        raise ConfigError(f"MLflow tag {name}: {text[:200]!r} is not JSON") from None


def _number(held: Mapping[str, str], name: str, default: float | None) -> float | None:
    text = held.get(name)
    if text is None or text == "None":
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ConfigError(f"MLflow tag {name}: {text[:200]!r} is not a finite number")
    return value


@dataclasses.dataclass(frozen=True)
class SweepTags:
    """The tags of a sweep's parent run.

    Attributes:
        objective: The primary objective's metric (``versatil.objective``; required: it is
            what marks a run as a sweep's parent).
        mode: Its direction (``versatil.mode``; default the first objective's, else min).
        objectives: ``(metric, direction)`` of every objective, the primary first
            (``versatil.objectives``; default the primary alone).
        tolerance: The verdict's tolerance (``versatil.tolerance``; default 0.01).
        target: The objective each trial's time to target was measured to
            (``versatil.target``), if the sweep's end recorded one.
        experiment_dir: Tune's experiment directory of the invocation
            (``versatil.experiment_dir``), if recorded.
        reference: The verdict's reference setting (``versatil.reference``), if the
            sweep's end recorded one.
    """

    objective: str
    mode: Direction
    objectives: list[tuple[str, Direction]]
    tolerance: float
    target: float | None
    experiment_dir: str | None
    reference: tuple[str, str, str] | None = None

    @classmethod
    def read(cls, held: Mapping[str, str]) -> SweepTags:
        """The parent run's tags ``held`` (``run.data.tags``) as a record.

        Raises:
            ConfigError: when the run is not a sweep's parent, or a tag holds a value no
                sweep writes.
        """
        objective = held.get(tags.OBJECTIVE)
        if not objective:
            raise ConfigError(f"MLflow run: no {tags.OBJECTIVE} tag; it is not a sweep's run")
        listed = _json(held, tags.OBJECTIVES, [])
        if not isinstance(listed, list) or not all(
            isinstance(o, list) and len(o) == 2 for o in listed
        ):
            raise ConfigError(f"MLflow tag {tags.OBJECTIVES}: {listed!r} is not [[metric, mode]]")
        objectives = [(str(m), _direction(tags.OBJECTIVES, str(d))) for m, d in listed]
        fallback = objectives[0][1].value if objectives else Direction.MIN.value
        mode = _direction(tags.MODE, held.get(tags.MODE, fallback))
        return cls(
            objective=objective,
            mode=mode,
            objectives=objectives or [(objective, mode)],
            tolerance=_number(held, tags.TOLERANCE, DEFAULT_TOLERANCE),  # type: ignore[arg-type]
            target=_number(held, tags.TARGET, None),
            experiment_dir=held.get(tags.EXPERIMENT_DIR),
            reference=_setting(held),
        )


@dataclasses.dataclass(frozen=True)
class TrialTags:
    """The tags of a trial's child run.

    Attributes:
        trial_id: Tune's trial id (``versatil.trial_id``; default the run's id).
        axes: The sweep's axes, which params the report compares (``versatil.axes``);
            ``None`` on a run that did not record them.
        trained_axes: The axes' values the trial's last epoch trained with
            (``versatil.trained_axes``; default none: the run's params hold them).
        status: The trial's status (``versatil.status``; default running: a run whose
            trial never reported). A status no version of this project writes reads as
            failed, the tag's text kept in ``reason``.
        reason: Why it was infeasible, failed or stopped (``versatil.reason``; default "").
    """

    trial_id: str
    axes: tuple[str, ...] | None
    trained_axes: dict[str, Any]
    status: TrialStatus
    reason: str

    @classmethod
    def read(cls, held: Mapping[str, str], run_id: str) -> TrialTags:
        """The child run's tags ``held`` as a record; ``run_id`` is the run's own id."""
        names = held.get(tags.AXES)
        trained = _json(held, tags.TRAINED_AXES, {})
        reason = held.get(tags.REASON, "")
        text = held.get(tags.STATUS, TrialStatus.RUNNING.value)
        try:
            status = TrialStatus(text)
        except ValueError:
            status = TrialStatus.FAILED
            reason = f"{text}: {reason}" if reason else text
        return cls(
            trial_id=held.get(tags.TRIAL_ID) or run_id,
            axes=tuple(n for n in names.split(",") if n) if names is not None else None,
            trained_axes=trained if isinstance(trained, dict) else {},
            status=status,
            reason=reason,
        )


@dataclasses.dataclass(frozen=True)
class Int8Tags:
    """The tags of an INT8 run of ``compress``, nested under its trial's run.

    Attributes:
        trial_id: The trial whose checkpoint was quantized (default "").
        sweep_run_id: The sweep's parent run (default "").
        parent_run_id: The trial's run, the INT8 run's parent (default "").
        backend: ``torchao`` or ``torch.ao`` (default "").
        source: Where the checkpoint came from (default "").
        fallback_reason: Why the first backend was not used, if it was not (default "").
    """

    trial_id: str
    sweep_run_id: str
    parent_run_id: str
    backend: str
    source: str
    fallback_reason: str

    @classmethod
    def read(cls, held: Mapping[str, str]) -> Int8Tags:
        """The INT8 run's tags ``held`` as a record."""
        return cls(
            trial_id=held.get(tags.INT8_TRIAL, ""),
            sweep_run_id=held.get(tags.INT8_SWEEP_RUN, ""),
            parent_run_id=held.get(tags.PARENT, ""),
            backend=held.get(tags.INT8_BACKEND, ""),
            source=held.get(tags.INT8_SOURCE, ""),
            fallback_reason=held.get(tags.INT8_FALLBACK, ""),
        )


def _setting(held: Mapping[str, str]) -> tuple[str, str, str] | None:
    """The ``versatil.reference`` tag as a setting; ``None`` where absent.

    Raises:
        ConfigError: when the tag is not three strings.
    """
    found = _json(held, tags.REFERENCE, None)
    if found is None:
        return None
    if not isinstance(found, list) or len(found) != 3 or not all(isinstance(v, str) for v in found):
        raise ConfigError(
            f"MLflow tag {tags.REFERENCE}: {found!r} is not [precision, compile_mode, "
            "matmul_precision]"
        )
    return (found[0], found[1], found[2])
