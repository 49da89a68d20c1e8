"""What Tune recorded durably of a sweep invocation, read from its experiment directory.

Each trial's ``result.json`` (every result, in order), its ``params.json`` (its config),
its checkpoints and its ``error.txt``, and Tune's experiment state (whether a trial ended)
are the source of truth: MLflow is a projection of them. Reading needs no Ray and no
tracking store, so a sweep's end, ``sync`` and a crashed driver's successor can all use it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from versatil.sweep.plan import Plan
from versatil.sweep.results.rows import TrialRow, make_row
from versatil.sweep.vocab.keys import SEED
from versatil.sweep.vocab.report import TrialReport

__all__ = ["TrialRecord", "axes_of", "read_trials", "row_from_record", "rows_from_records"]

ENDED = frozenset({"TERMINATED", "ERROR"})
"""Tune's statuses of a trial that will not run again (unless the sweep is resumed)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialRecord:
    """One trial as Tune recorded it.

    Attributes:
        trial_id: Tune's trial id (its directory's name).
        config: The trial's config: its values on the sweep's axes.
        results: Every result Tune wrote for it, in order (an epoch reported again after a
            restore appears again).
        tune_status: ``TERMINATED``, ``ERROR``, ``RUNNING``, ``PENDING`` or ``PAUSED`` as
            of Tune's last experiment snapshot; ``None`` when no snapshot names it.
        error: The last line of the trial's ``error.txt``, if it has one.
        checkpoint: The trial's newest checkpoint directory, if any.
    """

    trial_id: str
    config: dict[str, Any]
    results: list[dict[str, Any]]
    tune_status: str | None
    error: str = ""
    checkpoint: str | None = None

    @property
    def ended(self) -> bool:
        """Whether Tune recorded the trial as over (finished, stopped or errored)."""
        return self.tune_status in ENDED

    def epochs(self) -> dict[int, dict[str, Any]]:
        """The trial's result for each epoch: the latest one reported for it."""
        epochs = ((TrialReport.from_dict(r).epoch, r) for r in self.results)
        return {epoch: r for epoch, r in epochs if epoch is not None}

    def row(self, objective: str) -> TrialRow:
        """The trial's summary row on its own axes (see :func:`row_from_record`)."""
        return row_from_record(self, list(self.config), objective)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """The results in ``result.json``; a line torn by a kill mid-write is left out."""
    out = []
    if path.is_file():
        for line in path.read_text(errors="replace").splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
    return out


def _tune_statuses(experiment_dir: Path) -> dict[str, tuple[str, str | None]]:
    """Trial id -> (status, error file) from Tune's newest experiment snapshot."""
    snapshots = sorted(experiment_dir.glob("experiment_state-*.json"))
    for snapshot in reversed(snapshots):  # a kill may have torn the newest
        try:
            data = json.loads(snapshot.read_text())
            out = {}
            for trial_json, runtime_json in data["trial_data"]:
                trial, runtime = json.loads(trial_json), json.loads(runtime_json)
                out[trial["trial_id"]] = (trial["status"], runtime.get("error_filename"))
            return out
        except (ValueError, KeyError, TypeError, OSError):
            continue
    return {}


def _newest_checkpoint(trial_dir: Path, results: Sequence[Mapping[str, Any]]) -> str | None:
    """The checkpoint of the trial's last result that saved one, else the highest numbered.

    A restored trial numbers its checkpoints on from the one it restored; after a PBT
    exploit of an older one, a higher number can be a checkpoint of its former lineage.
    """
    for result in reversed(results):
        name = result.get("checkpoint_dir_name")
        if isinstance(name, str) and name and (trial_dir / name).is_dir():
            return str(trial_dir / name)
    found = [p for p in trial_dir.glob("checkpoint_*") if p.is_dir()]
    return str(max(found, key=lambda p: p.name)) if found else None


def read_trials(experiment_dir: Path) -> list[TrialRecord]:
    """Every trial of one sweep invocation, in trial id order."""
    statuses = _tune_statuses(experiment_dir)
    records = []
    for trial_dir in sorted(p for p in experiment_dir.iterdir() if (p / "params.json").is_file()):
        trial_id = trial_dir.name
        try:
            config = json.loads((trial_dir / "params.json").read_text())
        except ValueError:
            config = {}
        status = statuses.get(trial_id, (None, None))
        error = ""
        error_file = trial_dir / "error.txt"
        if error_file.is_file():
            lines = error_file.read_text(errors="replace").strip().splitlines()
            error = lines[-1][:500] if lines else ""
        results = _json_lines(trial_dir / "result.json")
        records.append(
            TrialRecord(
                trial_id=trial_id,
                config=config if isinstance(config, dict) else {},
                results=results,
                tune_status=status[0],
                error=error,
                checkpoint=_newest_checkpoint(trial_dir, results),
            )
        )
    return records


def row_from_record(record: TrialRecord, axes: Sequence[str], objective: str) -> TrialRow:
    """A trial's summary row from Tune's record of it alone (no Ray, no tracking store)."""
    errored = record.tune_status == "ERROR"
    last = record.results[-1] if record.results else {}
    trained = last.get("config")  # a PBT exploit mutates a trial's config as it goes
    return make_row(
        trial_id=record.trial_id,
        config=trained if isinstance(trained, dict) else record.config,
        metrics=last,
        epochs=record.epochs(),
        error=(record.error or "the trial's worker failed") if errored else None,
        checkpoint=record.checkpoint,
        axes=axes,
        objective=objective,
        ended=record.ended,
    )


def axes_of(axis_names: Sequence[str], trial_configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The sweep's axes, with ``seed`` where a trial has one (a repeated suggestion's)."""
    axes = list(axis_names)
    if SEED not in axes and any(SEED in c for c in trial_configs):
        axes.append(SEED)
    return axes


def rows_from_records(records: Sequence[TrialRecord], plan: Plan) -> list[TrialRow]:
    """Summary rows of a sweep from Tune's records alone (no Ray, no tracking store)."""
    axes = axes_of(plan.axis_names, [r.config for r in records])
    return [row_from_record(record, axes, plan.objectives.metric) for record in records]
