"""``python -m versatil.sweep confirm NAME``: re-time a finished sweep's candidates.

The latest run of the sweep under the storage path is judged from Tune's records; its
candidates (the reference, the settings in contention and the Pareto set's) train from
their checkpoints in paired, interleaved rounds on one device; the rounds decide the
verdict, which is printed and written to the sweep's MLflow runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from versatil.errors import ConfigError
from versatil.sweep.cli.sync import add_sweep_arguments

if TYPE_CHECKING:
    from versatil.sweep.config.schema import SweepConfig

__all__ = ["DESCRIPTION", "HELP", "NAME", "configure", "main"]

NAME = "confirm"
HELP = "re-time a sweep's candidates in paired, interleaved rounds"
DESCRIPTION = (
    "Re-time the latest run of a sweep: its reference, the settings in contention and the "
    "Pareto set's train from their checkpoints in alternating rounds on one device; the "
    "rounds decide the verdict, logged to the sweep's MLflow runs."
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Adds the arguments of ``confirm`` to ``parser``.

    Args:
        parser: The subcommand's parser.
    """
    add_sweep_arguments(parser)
    parser.add_argument("--address", default=None, help="a Ray cluster (default: a local Ray)")
    parser.add_argument("--rounds", type=int, default=None, help="default: confirm.rounds")


def main(args: argparse.Namespace, out: TextIO) -> int:
    """``confirm``: re-times the latest run of the sweep and prints the new verdict.

    Args:
        args: The parsed arguments of ``confirm``.
        out: Where progress and the verdict go.

    Returns:
        0, or 130 (SIGINT) or 143 (SIGTERM) when a signal stopped the re-timing.

    Raises:
        ConfigError: for a bad name or round count, no run of the sweep, or fewer than
            two settings with a checkpoint to compare.
    """
    import yaml

    from versatil.sweep.cli.sync import open_storage
    from versatil.sweep.config.limits import check_name
    from versatil.sweep.config.load import validate_sweep
    from versatil.sweep.tracking import PARENT_FILE
    from versatil.sweep.vocab.names import SWEEP_FILE, experiment_names

    check_name("confirm: sweep", args.sweep)
    if args.rounds is not None and not 2 <= args.rounds <= 100:
        raise ConfigError(f"confirm: --rounds {args.rounds} is out of range; use 2 to 100")
    storage, directories = open_storage("--storage-path", args.storage_path)
    found = [
        d
        for d in experiment_names(directories, args.sweep)
        if storage.exists(d, PARENT_FILE) and storage.exists(d, SWEEP_FILE)
    ]
    if not found:
        raise ConfigError(
            f"confirm: no run of sweep {args.sweep!r} under {storage.display()}; run it "
            "first, or give its --storage-path"
        )
    experiment_dir = storage.pull(found[-1])
    data = yaml.safe_load((experiment_dir / SWEEP_FILE).read_text())
    data["confirm"] = {**data.get("confirm", {}), "enabled": "on"}
    if args.rounds is not None:
        data["confirm"]["rounds"] = args.rounds
    config = validate_sweep(data, source=str(experiment_dir / SWEEP_FILE))
    return _stoppable(config, experiment_dir, args, out)


def _stoppable(
    config: SweepConfig, experiment_dir: Path, args: argparse.Namespace, out: TextIO
) -> int:
    """:func:`_confirm`, which SIGINT and SIGTERM stop with one line and their exit status."""
    from versatil.sweep.engine.stops import Stops

    stops = Stops()
    with stops.installed():
        try:
            return _confirm(config, experiment_dir, args, out, stops)
        except KeyboardInterrupt as interrupt:
            stop = stops.stop_of(interrupt)
            if stop is None:
                raise
            print(
                f"{stop.headline}: the re-timing was cancelled "
                "and its verdict not logged; run the same command to re-time again",
                file=out,
                flush=True,
            )
            return stop.exit_status


def _confirm(
    config: SweepConfig,
    experiment_dir: Path,
    args: argparse.Namespace,
    out: TextIO,
    stops: Any,
) -> int:
    """Judges the records, re-times the candidates, logs and prints the new verdict."""
    from versatil.sweep.config.planning import make_plan
    from versatil.sweep.engine.confirm import confirm_candidates
    from versatil.sweep.engine.ending import judge_end
    from versatil.sweep.engine.shipping import connect_with, plan_for
    from versatil.sweep.results.judgement import summary_text
    from versatil.sweep.results.records import read_trials, rows_from_records
    from versatil.sweep.tracking import log_end, reopen_sweep_run, runs_by_trial
    from versatil.sweep.tracking.store import client as mlflow_client

    records = read_trials(experiment_dir)
    plan = make_plan(config)
    shipment = plan_for(config, args.address)  # the task's code, for the re-timing's node
    contexts = []

    def retime(found: list[Any]) -> dict[str, Any]:
        # MLflow first: a store that does not answer fails before the rounds are spent.
        contexts.append(reopen_sweep_run(experiment_dir, args.tracking_uri))
        connect_with(shipment, args.address, out)
        stops.install()  # Ray's start put a handler of its own on SIGTERM
        return confirm_candidates(plan, found, out)

    concluded = judge_end(plan, rows_from_records(records, plan), records, retime)
    if concluded.confirmation is None:  # confirm.enabled is on: fewer than two candidates
        raise ConfigError(
            f"confirm: {experiment_dir.name} has fewer than two finished settings with a "
            "checkpoint: nothing to compare"
        )
    (context,) = contexts
    store = mlflow_client(context.tracking_uri)
    log_end(store, context.parent_run_id, runs_by_trial(store, context), concluded.end())
    print(file=out)
    print(summary_text(concluded.rows, concluded.judgement), file=out)
    return 0
