"""``python -m versatil.sweep sync NAME``: a sweep's MLflow runs reconciled with its storage.

What Tune recorded in the storage path (every result, every trial's end) is the source of
truth; ``sync`` logs whatever the runs lack (epochs a killed driver or an outage left
out, runs never opened or never ended), each once, and when every trial is over ends the
parent run with its summary, as the end of the sweep would have. It is safe at any time:
while a sweep runs, it backfills and leaves running trials open.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TextIO

import yaml

from versatil.errors import ConfigError, first_line
from versatil.sweep.cli.store import add_store_options
from versatil.sweep.storage import Storage, parse_location

__all__ = [
    "DESCRIPTION",
    "HELP",
    "NAME",
    "SyncOutcome",
    "add_sweep_arguments",
    "configure",
    "main",
    "sync_experiment",
]


NAME = "sync"
HELP = "backfill a sweep's MLflow runs from Tune's records"
DESCRIPTION = (
    "Backfill a sweep's MLflow runs from Tune's records in its storage path: every epoch "
    "once, every ended trial's run closed, the parent run ended."
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Adds the arguments of ``sync`` to ``parser``.

    Args:
        parser: The subcommand's parser.
    """
    add_sweep_arguments(parser)


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of a command on a sweep's storage path: its name, the path, MLflow.

    Args:
        parser: The subcommand's parser.
    """
    parser.add_argument("sweep", help="the sweep's name (its runs are NAME-<time> directories)")
    add_store_options(
        parser,
        storage_help="the sweep's storage path",
        tracking_help="default: the store the sweep recorded",
    )


@dataclasses.dataclass(frozen=True)
class SyncOutcome:
    """What ``sync`` did to one sweep invocation's runs.

    Attributes:
        experiment_dir: The invocation's Tune experiment directory.
        epochs: (trial id, epoch) pairs logged now.
        runs_created: Trials whose run did not exist.
        runs_ended: Trials whose run got its final status now.
        running: Trials Tune has not recorded as over; their runs stay open.
        parent_ended: Whether the parent run was ended (every trial over).
    """

    experiment_dir: Path
    epochs: list[tuple[str, int]]
    runs_created: list[str]
    runs_ended: list[str]
    running: list[str]
    parent_ended: bool

    def line(self) -> str:
        """One line for the console."""
        runs = len({trial for trial, _ in self.epochs})
        parts = ["nothing missing"]
        if self.epochs or self.runs_created or self.runs_ended:
            parts = [
                f"{len(self.epochs)} epochs backfilled in {runs} runs"
                + (f" ({len(self.runs_created)} created)" if self.runs_created else ""),
                f"{len(self.runs_ended)} runs ended",
            ]
        if self.running:
            parts.append(f"{len(self.running)} trials still running (runs left open)")
        parts.append("parent run ended" if self.parent_ended else "parent run left open")
        return f"{self.experiment_dir.name}: " + ", ".join(parts)


def sync_experiment(experiment_dir: Path, tracking_uri: str | None = None) -> SyncOutcome:
    """Reconciles one sweep invocation's runs with Tune's records in ``experiment_dir``."""
    from versatil.status import TrialStatus
    from versatil.sweep.config.load import validate_sweep
    from versatil.sweep.config.planning import make_plan
    from versatil.sweep.engine.ending import judge_end
    from versatil.sweep.engine.tracker import make_tracker
    from versatil.sweep.results.records import read_trials, rows_from_records
    from versatil.sweep.tracking import reopen_sweep_run
    from versatil.sweep.tracking.reconcile import close_runs
    from versatil.sweep.vocab.names import SWEEP_FILE

    sweep_file = experiment_dir / SWEEP_FILE
    if not sweep_file.is_file():
        raise ConfigError(
            f"sync: {experiment_dir} holds no {SWEEP_FILE}: it was not written by this "
            "version of versatil"
        )
    plan = make_plan(validate_sweep(yaml.safe_load(sweep_file.read_text())))
    tracker = make_tracker(reopen_sweep_run(experiment_dir, tracking_uri), plan)
    records = read_trials(experiment_dir)
    concluded = judge_end(plan, rows_from_records(records, plan), records)
    rows = concluded.rows
    done = close_runs(tracker, rows, records, concluded.end())
    return SyncOutcome(
        experiment_dir=experiment_dir,
        epochs=done.epochs,
        runs_created=done.runs_created,
        runs_ended=sorted(done.runs_ended),
        running=[row.trial_id for row in rows if row.status == TrialStatus.RUNNING],
        parent_ended=done.parent_ended,
    )


def main(args: argparse.Namespace, out: TextIO) -> int:
    """``sync``: every invocation of the sweep under the storage path, oldest first.

    Args:
        args: The parsed arguments of ``sync``.
        out: Where each invocation's line goes.

    Returns:
        0.

    Raises:
        ConfigError: for a bad name, no run of the sweep, or when MLflow fails.
    """
    from versatil.sweep.config.limits import check_name
    from versatil.sweep.tracking import PARENT_FILE
    from versatil.sweep.vocab.names import experiment_names, sweep_of

    check_name("sync: sweep", args.sweep)
    storage, directories = open_storage("--storage-path", args.storage_path)
    found = [d for d in experiment_names(directories, args.sweep) if storage.exists(d, PARENT_FILE)]
    if not found:
        names = sorted({s for d in directories if (s := sweep_of(d))})
        raise ConfigError(
            f"sync: no run of sweep {args.sweep!r} under {storage.display()}; choose from "
            f"{', '.join(names) or 'none (run a sweep first, or give its --storage-path)'}"
        )
    from mlflow.exceptions import MlflowException

    for name in found:
        try:
            outcome = sync_experiment(storage.pull(name), args.tracking_uri)
        except MlflowException as error:
            reason = " ".join(str(error).split())[:500]
            raise ConfigError(f"sync: {name}: MLflow failed: {reason}") from None
        print(outcome.line(), file=out)
    return 0


def open_storage(field: str, value: str) -> tuple[Storage, list[str]]:
    """The storage path a command reads, and the directories right under it.

    Raises:
        ConfigError: naming ``field`` for a bad path, or a store that cannot be read.
    """
    storage = Storage(parse_location(field, value))
    try:
        directories = storage.directories()
    except (OSError, ValueError) as error:
        reason = first_line(error)
        raise ConfigError(f"{field}: {storage.display()!r} cannot be read ({reason})") from None
    return storage, directories
