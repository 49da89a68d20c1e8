"""What a trial's worker reports to the driver: one typed, versioned record.

The worker builds each result as a :class:`TrialReport` and hands Ray Tune its
:meth:`~TrialReport.to_dict`: a flat dict whose keys are those of
:mod:`versatil.sweep.vocab.keys`, the measurements among them as top-level keys (Tune's
schedulers and searchers read the objective there, and MLflow logs every metric). The
driver reads any result back, from a Tune callback, the result grid or ``result.json``,
with :meth:`~TrialReport.from_dict`.

Versions (``report_version``, :data:`VERSION`):

- ``0``: results without the key, as earlier versions of versatil wrote them; the same
  keys, read with the same defaults.
- ``1`` (:data:`REPORT_VERSION`): this layout.

A result of a newer version is read all the same: the fields this one knows are read, and
every other key is kept, in :attr:`~TrialReport.metrics` when it is a number, else in
:attr:`~TrialReport.facts`, so :meth:`~TrialReport.to_dict` writes it back unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from versatil.status import TrialStatus
from versatil.sweep.vocab.keys import (
    BOOKKEEPING,
    EPOCH,
    FIT_TIME_S,
    HARDWARE_CEILING,
    HARDWARE_NOTES,
    HPARAMS,
    NODE_ID,
    PID,
    REASON,
    RESUMED,
    STATUS,
    STEP,
    STOPS_SWEEP,
    STOPS_SWEEP_BEFORE,
    UNREADABLE_SKIPPED,
    VERSION,
    WORLD_SIZE,
)

__all__ = ["REPORT_VERSION", "VERSION", "TrialReport"]

REPORT_VERSION = 1
"""The version of the layout :meth:`TrialReport.to_dict` writes."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialReport:
    """One result of a trial: after an epoch, or the one that ends a trial that cannot train.

    An epoch's report has an ``epoch``; an ending's (infeasible settings, bad params, out
    of memory, a missing objective) has none. :meth:`to_dict` leaves out what today's
    results do not carry: ``None`` fields, ``stops_sweep`` when false,
    ``unreadable_skipped`` when 0; ``resumed`` and ``world_size`` in an ending at their
    defaults; ``reason`` in an epoch's report when empty (an ending always carries it).

    Attributes:
        status: The trial's status; ``None`` when the result has none (Tune's result of a
            trial not reported yet) or one this version does not know (its value is then
            kept in ``facts``). Readers decide what no status means: a summary row counts
            a trial still going as ``running``, and one that ended as ``failed``.
        reason: Why the trial was infeasible, failed or stopped; ``""`` when no reason.
        epoch: The epoch reported (0-based), the MLflow step of its metrics; ``None`` in
            an ending.
        step: The fit's global step when it reported (what a step budget counts);
            ``None`` in an ending, and in results written before it was reported.
        resumed: Whether the fit went on from a checkpoint (a retry, a resume, a PBT
            exploit); ``False`` when absent.
        world_size: How many processes trained the fit; 1 when absent.
        node_id: The Ray node of the worker that reported; ``None`` when absent.
        pid: The worker's process id; ``None`` when absent.
        fit_time_s: Seconds inside the fit so far; ``None`` when absent (an ending).
        hparams: The module's hyperparameters, flattened to strings; only in a fit's first
            epoch (``None`` otherwise).
        hardware_ceiling: The device's measured matmul ceilings ``ceiling_fraction``
            divides by; ``None`` when not measured.
        hardware_notes: Why a hardware metric is absent (``{"flops": why, ...}``); ``None``
            when none is.
        stops_sweep: Whether every trial would meet this trial's problem the same way
            (the module never logged an objective; an endless epoch with no step
            budget): the sweep stops; ``False`` when absent.
        unreadable_skipped: How many unreadable newer checkpoints the restored trial passed
            over (``checkpoint/unreadable_skipped``); 0 when absent.
        facts: Every other key that is not a measurement: the worker's
            ``in_effect/matmul_precision`` and ``in_effect/default_dtype``, Tune's own
            keys (``config``, ``training_iteration``, ...), a newer version's; ``{}``.
        metrics: The measurements: every other numeric key not Tune's or versatil's
            bookkeeping (:data:`~versatil.sweep.vocab.keys.BOOKKEEPING`), the module's
            logged metrics and versatil's own (``samples_per_sec``, ...), an ending's
            worst objective values; ``{}``.
        version: The layout the result was written in; 0 when it names none.
    """

    status: TrialStatus | None
    reason: str = ""
    epoch: int | None = None
    step: int | None = None
    resumed: bool = False
    world_size: int = 1
    node_id: str | None = None
    pid: int | None = None
    fit_time_s: float | None = None
    hparams: dict[str, str] | None = None
    hardware_ceiling: dict[str, Any] | None = None
    hardware_notes: dict[str, str] | None = None
    stops_sweep: bool = False
    unreadable_skipped: int = 0
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    version: int = REPORT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The flat result Tune receives: metrics and facts as top-level keys, then fields.

        A field overrides a fact of the same key; a field left out (see the class) leaves
        such a fact as it was.
        """
        ending = self.epoch is None
        fields: dict[str, Any] = {
            EPOCH: self.epoch,
            STEP: self.step,
            NODE_ID: self.node_id,
            PID: self.pid,
            STATUS: self.status,
            REASON: self.reason if ending or self.reason else None,
            STOPS_SWEEP: True if self.stops_sweep else None,
            RESUMED: self.resumed if not ending or self.resumed else None,
            WORLD_SIZE: self.world_size if not ending or self.world_size != 1 else None,
            FIT_TIME_S: self.fit_time_s,
            HPARAMS: self.hparams,
            HARDWARE_CEILING: self.hardware_ceiling,
            HARDWARE_NOTES: self.hardware_notes,
            UNREADABLE_SKIPPED: self.unreadable_skipped or None,
            VERSION: self.version,
        }
        result: dict[str, Any] = {**self.metrics, **self.facts}
        result.update((key, value) for key, value in fields.items() if value is not None)
        return result

    @classmethod
    def from_dict(cls, result: Mapping[str, Any]) -> TrialReport:
        """A result read back, of any version; an absent key takes its field's default.

        A key whose value does not have its field's type takes the default too, and is
        kept in ``facts``. See the class's attributes for each default.

        Args:
            result: A result as Tune holds it (a callback's, the result grid's, a line of
                ``result.json``), or a trial's metrics read back from MLflow.
        """
        rest = dict(result)
        fields: dict[str, Any] = {"status": None, "version": 0}
        for key, name, read in _FIELDS:
            value = read(rest[key]) if key in rest else None
            if value is not None:
                fields[name] = value
                del rest[key]
        metrics = {k: float(v) for k, v in rest.items() if _is_metric(k, v)}
        facts = {k: v for k, v in rest.items() if k not in metrics}
        return cls(**fields, facts=facts, metrics=metrics)


def _is_metric(key: str, value: Any) -> bool:
    """Whether ``key: value`` is a measurement: a number that is not bookkeeping."""
    return key not in BOOKKEEPING and not isinstance(value, bool) and isinstance(value, int | float)


def _status(value: Any) -> TrialStatus | None:
    """The status ``value`` names, or ``None`` when it names none this version knows."""
    try:
        return TrialStatus(value)
    except ValueError:
        return None


def _of(kind: type, convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A reader: ``convert(value)`` when ``value`` is a ``kind`` (not a bool), else ``None``."""

    def read(value: Any) -> Any:
        if not isinstance(value, kind) or isinstance(value, bool):
            return None
        try:
            return convert(value)
        except (ValueError, OverflowError):  # int() of NaN or infinity
            return None

    return read


def _text_map(value: Any) -> dict[str, str] | None:
    """A mapping's keys and values as text, or ``None`` when ``value`` is no mapping."""
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else None


_NUMBER = int | float
_FIELDS: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    (STATUS, "status", _status),
    (REASON, "reason", lambda v: "" if v is None else str(v)),
    (EPOCH, "epoch", _of(_NUMBER, int)),
    (STEP, "step", _of(_NUMBER, int)),
    (RESUMED, "resumed", bool),
    (WORLD_SIZE, "world_size", _of(_NUMBER, int)),
    (NODE_ID, "node_id", _of(str, str)),
    (PID, "pid", _of(_NUMBER, int)),
    (FIT_TIME_S, "fit_time_s", _of(_NUMBER, float)),
    (HPARAMS, "hparams", _text_map),
    (HARDWARE_CEILING, "hardware_ceiling", _of(Mapping, dict)),
    (HARDWARE_NOTES, "hardware_notes", _text_map),
    (STOPS_SWEEP_BEFORE, "stops_sweep", bool),
    (STOPS_SWEEP, "stops_sweep", bool),
    (UNREADABLE_SKIPPED, "unreadable_skipped", _of(_NUMBER, int)),
    (VERSION, "version", _of(int, int)),
)
"""Each field's key, name, and reader: the field's value, or ``None`` when it has none."""
