"""``python -m versatil.sweep``: run, resume or dry-run a sweep (default: the quickstart)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from versatil.cli_common import parse_assignment
from versatil.errors import ConfigError
from versatil.sweep.cli.report import FORMATS
from versatil.sweep.config.shipped import DEFAULT_SWEEP_NAME, resolve_config, shipped_sweeps

if TYPE_CHECKING:
    from versatil.sweep.cli.report import SweepReport


def build_report_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m versatil.sweep report``."""
    parser = argparse.ArgumentParser(
        prog="python -m versatil.sweep report",
        description="Compare a sweep's trials, read back from MLflow; plots go to the parent run.",
    )
    parser.add_argument("experiment", help="the sweep's MLflow experiment (its name)")
    parser.add_argument("--tracking-uri", default=None, help="default: the embedded SQLite store")
    parser.add_argument(
        "--storage-path", default="runs/sweeps", help="storage path holding the embedded store"
    )
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--output", type=Path, default=None, help="default: runs/reports/NAME")
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m versatil.sweep``; its help ends with the subcommands'."""
    from versatil.sweep.cli.sync import build_sync_parser
    from versatil.sweep.int8.compress import build_compress_parser

    helps = [
        build_report_parser().format_help(),
        build_compress_parser().format_help(),
        build_sync_parser().format_help(),
    ]
    parser = argparse.ArgumentParser(
        prog="python -m versatil.sweep",
        description="Sweep precision, compile mode, matmul precision and params with Ray Tune.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="subcommands:\n  report   compare a finished sweep's trials (read from MLflow)\n"
        "  compress INT8-quantize a sweep's winners, logged beside their trials\n"
        "  sync     backfill a sweep's MLflow runs from Tune's records\n\n"
        + "\n\n".join(
            "\n".join(f"  {line}".rstrip() for line in text.splitlines()) for text in helps
        ),
    )
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE|NAME",
        help=f"a sweep file, or a shipped sweep by name: {', '.join(shipped_sweeps())} "
        f"(default: {DEFAULT_SWEEP_NAME})",
    )
    parser.add_argument("--address", default=None, help="address of a running Ray cluster")
    parser.add_argument("--storage-path", default=None, help="where Tune keeps results")
    parser.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow server (http://host:port); default: SQLite file under the storage path",
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue the latest interrupted run of this sweep"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="validate and list the trials; start nothing"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="override a field, e.g. trainer.max_epochs=2 (repeatable)",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def parse_report_args(argv: list[str]) -> argparse.Namespace:
    return build_report_parser().parse_args(argv)


def load_report_or_explain(uri: str, experiment: str) -> SweepReport:
    """``load_report``, with MLflow's own failures (a server gone since) as a ConfigError."""
    from mlflow.exceptions import MlflowException

    from versatil.sweep.cli.report import load_report

    try:
        return load_report(uri, experiment)
    except MlflowException as error:
        reason = " ".join(str(error).split())
        raise ConfigError(f"report: MLflow at {uri!r} failed: {reason[:500]}") from None


def report_main(argv: list[str]) -> int:
    """``report``: print the comparison and log plots, CSV and markdown to the parent run."""
    args = parse_report_args(argv)
    from versatil.sweep.config.schema import check_name
    from versatil.sweep.tracking import check_server, default_tracking_uri

    check_name("report: experiment", args.experiment)
    uri = args.tracking_uri or default_tracking_uri(Path(args.storage_path).resolve())
    check_server(uri)
    from versatil.sweep.cli.report import log_report, render

    report = load_report_or_explain(uri, args.experiment)
    print(render(report, args.format))
    output = args.output or Path("runs/reports") / args.experiment
    paths = log_report(report, output)
    if args.format == "table":
        print(f"plots: {', '.join(str(p) for p in paths if p.suffix == '.png')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:
        return report_main(argv[1:])
    if argv[:1] == ["compress"]:
        from versatil.sweep.int8.compress import compress_main

        return compress_main(argv[1:])
    if argv[:1] == ["sync"]:
        from versatil.sweep.cli.sync import sync_main

        return sync_main(argv[1:])
    args = parse_args(argv)
    from versatil.sweep.config.schema import load_sweep

    overrides = dict(parse_assignment(item) for item in args.overrides)
    if args.storage_path:
        overrides["storage_path"] = args.storage_path
    config = load_sweep(resolve_config(args.config), overrides)
    if args.dry_run:
        from versatil.sweep.engine.dry_run import print_dry_run

        print_dry_run(config)
        return 0
    from versatil.sweep.cli.report import SweepReport, load_report, log_report, render, write_plots
    from versatil.sweep.engine.runner import run_sweep

    outcome = run_sweep(
        config, address=args.address, resume=args.resume, tracking_uri=args.tracking_uri
    )
    tracking = outcome.tracking
    compressed = None
    if outcome.gap is None:
        from versatil.sweep.int8.compress import compress_after_sweep

        compressed = compress_after_sweep(config, outcome)
        # The summary is the report: read back from MLflow, with the same table and plots.
        report = load_report(tracking.tracking_uri, config.experiment_name, tracking.parent_run_id)
    else:  # the store did not answer: the same report from Tune's records
        report = SweepReport(
            tracking,
            config.objective.mode,
            outcome.rows,
            config.objective.objectives,
            config.objective.tolerance,
        )
    print()
    print(render(report, "table"))
    directory = outcome.experiment_dir / "report"
    plots = log_report(report, directory) if outcome.gap is None else write_plots(report, directory)
    print()
    counts = {}
    for row in outcome.rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    print(
        f"{len(outcome.rows)} trials in {outcome.wall_s:.1f}s: "
        + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    )
    if outcome.gap is not None:
        print(f"warning: {outcome.gap.message()}", file=sys.stderr)
        if config.post_training.selection() is not None:
            print("warning: post_training was skipped: it logs to MLflow", file=sys.stderr)
    if outcome.best is None:
        print("no trial produced a finite objective", file=sys.stderr)
        return 1
    best = outcome.best
    print(
        f"best: {best.trial_id} {config.objective.metric}={best.objective:.4g} "
        + " ".join(f"{k}={v}" for k, v in best.axes.items())
    )
    print(f"best checkpoint: {best.checkpoint}")
    print(f"results: {outcome.experiment_dir}")
    print(f"plots: {', '.join(str(p) for p in plots if p.suffix == '.png')}")
    print(
        f"mlflow: experiment {config.experiment_name!r}, parent run "
        f"{outcome.tracking.parent_run_id} at {outcome.tracking.tracking_uri}"
    )
    if compressed is not None and compressed.failed:
        for trial, reason in compressed.failed:
            print(f"error: {trial} was not compressed: {reason}", file=sys.stderr)
        return 1
    return 0
