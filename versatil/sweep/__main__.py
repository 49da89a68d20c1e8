"""``python -m versatil.sweep``: run, resume or dry-run a sweep (default: the quickstart)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from versatil.cli_common import parse_assignment, run_cli
from versatil.sweep.report import FORMATS

DEFAULT_SWEEP = Path(__file__).resolve().parents[2] / "sweeps" / "quickstart.yaml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m versatil.sweep",
        description="Sweep precision, compile mode, matmul precision and params with Ray Tune.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_SWEEP,
        help="sweep file (default: sweeps/quickstart.yaml)",
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
    return parser.parse_args(argv)


def parse_report_args(argv: list[str]) -> argparse.Namespace:
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
    return parser.parse_args(argv)


def report_main(argv: list[str]) -> int:
    """``report``: print the comparison and log plots, CSV and markdown to the parent run."""
    args = parse_report_args(argv)
    from versatil.sweep.report import load_report, log_report, render
    from versatil.sweep.tracking import default_tracking_uri

    uri = args.tracking_uri or default_tracking_uri(Path(args.storage_path).resolve())
    report = load_report(uri, args.experiment)
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
    args = parse_args(argv)
    from versatil.sweep.config import load_sweep

    overrides = dict(parse_assignment(item) for item in args.overrides)
    if args.storage_path:
        overrides["storage_path"] = args.storage_path
    config = load_sweep(args.config, overrides)
    if args.dry_run:
        from versatil.sweep.dry_run import print_dry_run

        print_dry_run(config)
        return 0
    from versatil.sweep.report import load_report, log_report, render
    from versatil.sweep.runner import run_sweep

    outcome = run_sweep(
        config, address=args.address, resume=args.resume, tracking_uri=args.tracking_uri
    )
    # The summary is the report: read back from MLflow, with the same table and plots.
    tracking = outcome.tracking
    report = load_report(tracking.tracking_uri, config.experiment_name, tracking.parent_run_id)
    print()
    print(render(report, "table"))
    plots = log_report(report, outcome.experiment_dir / "report")
    print()
    counts = {}
    for row in outcome.rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    print(
        f"{len(outcome.rows)} trials in {outcome.wall_s:.1f}s: "
        + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    )
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
    return 0


if __name__ == "__main__":
    run_cli(main)
