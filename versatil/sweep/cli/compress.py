"""``python -m versatil.sweep compress NAME``: a sweep's winners to INT8, logged beside them.

The command reads its flags, chooses the trials (the Pareto front by default, ``--top K``
or ``--trial ID``) and hands them to :func:`versatil.sweep.int8.compress.compress_sweep`,
which compresses and logs them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from versatil.errors import ConfigError
from versatil.sweep.cli.store import add_store_options, reading_store
from versatil.sweep.config.post_training import Selection

__all__ = [
    "DESCRIPTION",
    "HELP",
    "NAME",
    "configure",
    "main",
    "parse_selection",
]

NAME = "compress"
HELP = "INT8-quantize a sweep's winners, logged beside their trials"
DESCRIPTION = (
    "Compress a sweep's winners to INT8 (dynamic, nn.Linear) and log each as a run nested "
    "under its trial's run; the report then lists them."
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Adds the arguments of ``compress`` to ``parser``.

    Args:
        parser: The subcommand's parser.
    """
    parser.add_argument("experiment", help="the sweep's MLflow experiment (its name)")
    parser.add_argument(
        "--pareto",
        action="store_true",
        help="the trials on the Pareto front of objective vs samples_per_sec (the default)",
    )
    parser.add_argument("--top", type=int, metavar="K", help="the K best trials by objective")
    parser.add_argument("--trial", metavar="ID", help="one trial, by its id")
    add_store_options(parser)
    parser.add_argument(
        "--backend",
        choices=("torchao", "torch.ao"),
        default=None,
        help="default: torchao when it is installed and works on the model, else torch.ao",
    )
    parser.add_argument("--output", type=Path, default=None, help="default: runs/compressed/NAME")


def parse_selection(args: argparse.Namespace) -> Selection:
    """The one selection the flags ask for (``--pareto`` when none does).

    Args:
        args: The parsed arguments of ``compress``.

    Raises:
        ConfigError: for more than one of ``--pareto``, ``--top``, ``--trial``, or K < 1.
    """
    given = [
        flag
        for flag, value in (("--pareto", args.pareto), ("--top", args.top), ("--trial", args.trial))
        if value not in (None, False)
    ]
    if len(given) > 1:
        raise ConfigError(
            f"compress: {' and '.join(given)} cannot be combined; give one of --pareto, "
            "--top K or --trial ID"
        )
    if args.top is not None:
        if args.top < 1:
            raise ConfigError(f"compress: --top {args.top}: K must be at least 1")
        return Selection("top", k=args.top)
    if args.trial is not None:
        return Selection("trial", trial_id=args.trial)
    return Selection("pareto")


def main(args: argparse.Namespace, out: TextIO) -> int:
    """``compress``: INT8 the chosen trials, log them and print their table.

    Args:
        args: The parsed arguments of ``compress``.
        out: Where the progress lines and the table go; failures go to stderr.

    Returns:
        0, or 1 when any chosen trial could not be compressed.

    Raises:
        ConfigError: for a bad name or selection, an unusable tracking URI, an unknown
            sweep or trial, or a chosen trial without a checkpoint.
    """
    from versatil.sweep.config.limits import check_name

    check_name("compress: experiment", args.experiment)
    selection = parse_selection(args)
    with reading_store(args.tracking_uri, args.storage_path) as uri:
        return _compress(args, uri, selection, out)


def _compress(args: argparse.Namespace, uri: str, selection: Selection, out: TextIO) -> int:
    """Compresses the selected trials of the sweep in the store at ``uri``; prints the table."""
    from versatil.sweep.int8.compress import compress_sweep
    from versatil.sweep.report.render import INT8_LEGEND, int8_table

    output = args.output or Path("runs/compressed") / args.experiment
    outcome = compress_sweep(
        uri, args.experiment, selection, output, backend=args.backend, stream=out
    )
    if outcome.int8:
        print(file=out)
        print(int8_table(outcome.int8, outcome.report.context.objective), file=out)
        print(f"\n{INT8_LEGEND}", file=out)
        print(f"INT8 checkpoints: {output}", file=out)
    for trial, reason in outcome.failed:
        print(f"error: {trial} was not compressed: {reason}", file=sys.stderr)
    return 1 if outcome.failed else 0
