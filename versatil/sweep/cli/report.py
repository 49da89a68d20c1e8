"""``python -m versatil.sweep report NAME``: compare a sweep's trials, read back from MLflow.

The comparison is printed; its plots, CSV and markdown are logged to the sweep's parent
run and written under ``--output``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from versatil.errors import ConfigError
from versatil.sweep.cli.store import add_store_options, reading_store
from versatil.sweep.report.render import FORMATS

if TYPE_CHECKING:
    from versatil.sweep.report.load import SweepReport

__all__ = [
    "DESCRIPTION",
    "HELP",
    "NAME",
    "configure",
    "load_report_or_explain",
    "main",
]

NAME = "report"
HELP = "compare a finished sweep's trials (read from MLflow)"
DESCRIPTION = "Compare a sweep's trials, read back from MLflow; plots go to the parent run."


def configure(parser: argparse.ArgumentParser) -> None:
    """Adds the arguments of ``report`` to ``parser``.

    Args:
        parser: The subcommand's parser.
    """
    parser.add_argument("experiment", help="the sweep's MLflow experiment (its name)")
    add_store_options(parser)
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="how the comparison prints: a table for reading, or csv, json or markdown",
    )
    parser.add_argument("--output", type=Path, default=None, help="default: runs/reports/NAME")


def load_report_or_explain(uri: str, experiment: str) -> SweepReport:
    """``load_report``, with MLflow's own failures (a server gone since) as a ConfigError.

    Args:
        uri: The tracking store.
        experiment: The sweep's MLflow experiment.

    Raises:
        ConfigError: for an unknown experiment, or when MLflow fails.
    """
    from mlflow.exceptions import MlflowException

    from versatil.sweep.report.load import load_report

    try:
        return load_report(uri, experiment)
    except MlflowException as error:
        reason = " ".join(str(error).split())
        raise ConfigError(f"report: MLflow at {uri!r} failed: {reason[:500]}") from None


def main(args: argparse.Namespace, out: TextIO) -> int:
    """``report``: prints the comparison and logs plots, CSV and markdown to the parent run.

    Args:
        args: The parsed arguments of ``report``.
        out: Where the comparison goes.

    Returns:
        0.

    Raises:
        ConfigError: for a bad name, an unusable tracking URI or an unknown sweep.
    """
    from versatil.sweep.config.limits import check_name

    check_name("report: experiment", args.experiment)
    with reading_store(args.tracking_uri, args.storage_path) as uri:
        return _report(args, uri, out)


def _report(args: argparse.Namespace, uri: str, out: TextIO) -> int:
    """Loads, prints and logs the report of ``args.experiment`` from the store at ``uri``."""
    from versatil.sweep.report.plots import log_report
    from versatil.sweep.report.render import render

    report = load_report_or_explain(uri, args.experiment)
    print(render(report, args.format), file=out)
    output = args.output or Path("runs/reports") / args.experiment
    paths = log_report(report, output)
    if args.format == "table":
        print(f"plots: {', '.join(str(p) for p in paths if p.suffix == '.png')}", file=out)
    return 0
