"""The default command of ``python -m versatil.sweep``: run, resume or dry-run a sweep.

Its options sit on the top-level parser: ``python -m versatil.sweep`` with no subcommand
runs the quickstart, ``--config FILE|NAME`` another sweep, ``--dry-run`` lists the trials
and starts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from typing import TYPE_CHECKING, Any, TextIO

from versatil.cli_common import parse_assignment
from versatil.sweep.cli.logs import EMBEDDED_STORE_LOGGERS, quiet_loggers
from versatil.sweep.cli.store import add_store_options
from versatil.sweep.config.shipped import DEFAULT_SWEEP_NAME, resolve_config, shipped_sweeps

if TYPE_CHECKING:
    from versatil.sweep.config.schema import SweepConfig
    from versatil.sweep.report.load import SweepReport

__all__ = ["DESCRIPTION", "configure", "load_config", "main"]

DESCRIPTION = "Sweep precision, compile mode, matmul precision and params with Ray Tune."


RELEASE_WAIT_S = 0.25
"""How long the command's exit waits for Ray's shutdown, begun before the summary."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Adds the run command's options to ``parser`` (the top-level one).

    Args:
        parser: The parser to add ``--config``, ``--address``, ``--storage-path``,
            ``--tracking-uri``, ``--resume``, ``--auto-resume``, ``--dry-run``,
            ``--no-confirm`` and ``--set`` to.
    """
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE|NAME",
        help=f"a sweep file, or a shipped sweep by name: {', '.join(shipped_sweeps())} "
        f"(default: {DEFAULT_SWEEP_NAME})",
    )
    parser.add_argument("--address", default=None, help="address of a running Ray cluster")
    add_store_options(
        parser,
        storage_default=None,
        storage_help="where Tune keeps results",
        tracking_help="MLflow server (http://host:port); default: mlflow.tracking_uri of the "
        "sweep, else MLFLOW_TRACKING_URI, else a SQLite file under the storage path",
    )
    resuming = parser.add_mutually_exclusive_group()
    resuming.add_argument(
        "--resume", action="store_true", help="continue the latest interrupted run of this sweep"
    )
    resuming.add_argument(
        "--auto-resume",
        action="store_true",
        help="continue the latest run if it was interrupted, else start a new one "
        "(the command a retried job runs)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="validate and list the trials; start nothing"
    )
    parser.add_argument(
        "--no-confirm",
        action="store_true",
        help="skip the end's paired re-timing of the settings in contention (confirm.enabled=off)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="override a field, e.g. trainer.max_epochs=2 (repeatable)",
    )


def load_config(args: argparse.Namespace) -> SweepConfig:
    """The sweep the options name, with ``--set`` and ``--storage-path`` applied.

    Args:
        args: The parsed options of the run command.

    Raises:
        ConfigError: for a bad sweep file, name or override.
    """
    from versatil.sweep.config.load import load_sweep

    overrides = dict(parse_assignment(item) for item in args.overrides)
    if getattr(args, "no_confirm", False):
        overrides["confirm.enabled"] = "off"
    if args.storage_path:
        overrides["storage_path"] = args.storage_path
    return load_sweep(resolve_config(args.config), overrides)


def main(args: argparse.Namespace, out: TextIO) -> int:
    """Runs the sweep (or with ``--dry-run`` lists its trials) and prints its summary.

    Args:
        args: The parsed options of the run command.
        out: Where the trial list, progress and summary go; warnings go to stderr.

    Returns:
        0, or 1 when no trial produced a finite objective or a trial was not compressed,
        or 130 (SIGINT) or 143 (SIGTERM) when a signal stopped the sweep.
    """
    config = load_config(args)
    if args.dry_run:
        from versatil.sweep.engine.dry_run import print_dry_run

        with contextlib.redirect_stdout(out):
            print_dry_run(config)
        return 0
    from versatil.sweep.tracking import tracking_store

    named = tracking_store(
        ("--tracking-uri", args.tracking_uri), ("mlflow.tracking_uri", config.mlflow.tracking_uri)
    )
    with quiet_loggers(EMBEDDED_STORE_LOGGERS if named is None else ()):
        return _run(config, args, out)


def _run(config: SweepConfig, args: argparse.Namespace, out: TextIO) -> int:
    """Runs the sweep, compresses its winners as the sweep file asks, and summarizes."""
    from versatil.sweep.engine.runner import run_sweep
    from versatil.sweep.engine.stops import SweepInterrupted

    try:
        outcome = run_sweep(
            config,
            address=args.address,
            resume=args.resume,
            auto_resume=args.auto_resume,
            tracking_uri=args.tracking_uri,
            stream=out,
            # A process of its own lets Ray go while the sweep's end is logged and printed.
            release_ray=getattr(args, "own_process", False),
        )
    except SweepInterrupted as stop:
        print(interrupted_line(stop, args), file=out, flush=True)
        return stop.exit_status
    try:
        return _summarize(config, outcome, out)
    finally:
        if outcome.releasing_ray is not None:
            # A local cluster's processes share this process's fate (Ray's kernel fate
            # sharing: they are killed with it), so a shutdown still under way when the
            # summary is printed need not hold the command's exit up for long.
            outcome.releasing_ray.join(timeout=RELEASE_WAIT_S)


def interrupted_line(stop: Any, args: argparse.Namespace) -> str:
    """The one line an interrupted sweep ends with: what was saved, and how to go on.

    Args:
        stop: The :class:`~versatil.sweep.engine.stops.SweepInterrupted` that ended it.
        args: The parsed options of the run command (``args.argv``, the command line).
    """
    stopped = stop.headline
    if stop.ended is None and not stop.at_once:
        return f"{stopped} before its trials started; run the same command to start again"
    # --auto-resume continues as it is; otherwise --resume continues this run.
    argv = [a for a in getattr(args, "argv", []) if a not in ("--resume", "--auto-resume")]
    again = [*argv, "--auto-resume" if args.auto_resume else "--resume"]
    command = shlex.join(["python", "-m", "versatil.sweep", *again])
    return f"{stopped}: {stop.saved()}; continue with: {command}"


def _summarize(config: SweepConfig, outcome: Any, out: TextIO) -> int:
    """Compresses the winners as the sweep file asks, then prints the summary."""
    compressed = None
    if outcome.gap is None:
        from versatil.sweep.int8.compress import compress_after_sweep

        compressed = compress_after_sweep(config, outcome, stream=out)
    plots = _print_report(config, outcome, out)
    _print_counts(outcome, out)
    if outcome.gap is not None:
        print(f"warning: {outcome.gap.message()}", file=sys.stderr)
        if config.post_training.selection() is not None:
            print("warning: post_training was skipped: it logs to MLflow", file=sys.stderr)
    if outcome.best is None:
        print("no trial produced a finite objective", file=sys.stderr)
        return 1
    _print_best(config, outcome, plots, out)
    if compressed is not None and compressed.failed:
        for trial, reason in compressed.failed:
            print(f"error: {trial} was not compressed: {reason}", file=sys.stderr)
        return 1
    return 0


def _sweep_report(config: SweepConfig, outcome: Any) -> SweepReport:
    """The sweep's report: read back from MLflow, or from Tune's records when it did not answer."""
    from versatil.sweep.report.load import SweepReport, load_report

    tracking = outcome.tracking
    if outcome.gap is None:
        # The summary is the report: read back from MLflow, with the same table and plots.
        return load_report(
            tracking.tracking_uri,
            config.experiment_name,
            tracking.parent_run_id,
            outcome.judgement,  # the end's own: the verdict is not made again
        )
    report = SweepReport(
        tracking,
        config.objective.mode,
        outcome.rows,
        config.objective.objectives,
        config.objective.tolerance,
        outcome.confirmation,
        outcome.judgement.verdict.target if outcome.judgement else None,
        outcome.judgement,
    )
    report.race, report.compute = outcome.race, outcome.compute
    return report


def _print_report(config: SweepConfig, outcome: Any, out: TextIO) -> list[Any]:
    """Prints the trials' table and writes the plots; returns the files written."""
    from versatil.sweep.report.plots import log_report, write_plots
    from versatil.sweep.report.render import render

    report = _sweep_report(config, outcome)
    print(file=out)
    print(render(report, "table"), file=out)
    directory = outcome.experiment_dir / "report"
    written = (
        log_report(report, directory) if outcome.gap is None else write_plots(report, directory)
    )
    if outcome.storage is not None:  # object storage: beside the results, as on a disk
        outcome.storage.push(outcome.experiment_dir.name, "report")
    return written


def _print_counts(outcome: Any, out: TextIO) -> None:
    """Prints how many trials ran, in how long, by status."""
    counts: dict[str, int] = {}
    for row in outcome.rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    print(file=out)
    print(
        f"{len(outcome.rows)} trials in {outcome.wall_s:.1f}s: "
        + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())),
        file=out,
    )


def _print_best(config: SweepConfig, outcome: Any, plots: list[Any], out: TextIO) -> None:
    """Prints the best trial and where its checkpoint, results, plots and runs are."""
    from versatil.sweep.storage import checkpoint_ref

    best = outcome.best
    print(
        f"best: {best.trial_id} {config.objective.metric}={best.objective:.4g} "
        + " ".join(f"{k}={v}" for k, v in best.axes.items()),
        file=out,
    )
    print(f"best checkpoint: {checkpoint_ref(best.checkpoint)}", file=out)
    print(f"results: {outcome.where}", file=out)
    print(f"plots: {', '.join(str(p) for p in plots if p.suffix == '.png')}", file=out)
    print(
        f"mlflow: experiment {config.experiment_name!r}, parent run "
        f"{outcome.tracking.parent_run_id} at {outcome.tracking.tracking_uri}",
        file=out,
    )
