"""``python -m versatil.sweep``: run, resume or dry-run a sweep (default: the quickstart)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from versatil.cli_common import parse_assignment, run_cli

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


def main(argv: list[str] | None = None) -> int:
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
    from versatil.sweep.runner import run_sweep
    from versatil.sweep.summary import format_table

    outcome = run_sweep(
        config, address=args.address, resume=args.resume, tracking_uri=args.tracking_uri
    )
    marks = {outcome.best.trial_id: "*"} if outcome.best else {}
    print()
    print(format_table(outcome.rows, config.objective.metric, marks))
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
    print(
        f"mlflow: experiment {config.experiment_name!r}, parent run "
        f"{outcome.tracking.parent_run_id} at {outcome.tracking.tracking_uri}"
    )
    return 0


if __name__ == "__main__":
    run_cli(main)
