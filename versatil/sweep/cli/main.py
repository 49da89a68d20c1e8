"""``python -m versatil.sweep``: the command table.

With no subcommand the command runs, resumes or dry-runs a sweep (the quickstart by
default; options in :mod:`versatil.sweep.cli.run`); ``report``, ``confirm``, ``compress``
and ``sync`` are subcommands, each in a module of its own with its ``NAME``, ``HELP``,
``DESCRIPTION``, ``configure(parser)`` and ``main(args, out)``; the table here builds
their parsers. Every command prints to one output stream, ``out``; warnings and
errors go to stderr.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType
from typing import TextIO

from versatil.sweep.cli import compress, confirm, report, run, sync

__all__ = [
    "PROG",
    "SUBCOMMANDS",
    "build_parser",
    "build_report_parser",
    "main",
    "parse_args",
    "standalone_parser",
]

PROG = "python -m versatil.sweep"

SUBCOMMANDS: dict[str, ModuleType] = {
    command.NAME: command for command in (report, confirm, compress, sync)
}
"""The subcommands, by name, in the order the help lists them."""


def standalone_parser(command: ModuleType) -> argparse.ArgumentParser:
    """A subcommand's parser on its own (``python -m versatil.sweep NAME``)."""
    parser = argparse.ArgumentParser(prog=f"{PROG} {command.NAME}", description=command.DESCRIPTION)
    command.configure(parser)
    return parser


def build_report_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m versatil.sweep report``, on its own."""
    return standalone_parser(report)


def _build() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each subcommand's parser, by name."""
    parser = argparse.ArgumentParser(prog=PROG, description=run.DESCRIPTION)
    run.configure(parser)
    # Two forms: the run command's options, or a subcommand (whose usage names its own).
    run_usage = parser.format_usage().removeprefix("usage: ").rstrip()
    parser.usage = f"{run_usage}\n       {PROG} COMMAND ..."
    subparsers = parser.add_subparsers(
        prog=PROG,
        dest="command",
        title="subcommands",
        metavar="COMMAND",
        description=f"with none, run the sweep the options above name; "
        f"`{PROG} COMMAND --help` for a subcommand's own",
    )
    commands = {}
    for name, command in SUBCOMMANDS.items():
        commands[name] = subparsers.add_parser(
            name, help=command.HELP, description=command.DESCRIPTION
        )
        command.configure(commands[name])
    return parser, commands


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m versatil.sweep``: the run options and the subcommands."""
    return _build()[0]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parses a command line; ``args.command`` is ``None`` for the run command.

    Args:
        argv: The arguments after the program's name; default: ``sys.argv[1:]``.

    Raises:
        SystemExit: argparse's exit for ``--help`` (0) and for bad arguments (2), with
            the usage of the (sub)command they were given to.
    """
    argv = sys.argv[1:] if argv is None else argv
    parser, commands = _build()
    args, extra = parser.parse_known_args(argv)
    if args.command is not None and argv[:1] != [args.command]:
        parser.error(f"{args.command}: the subcommand comes first: {PROG} {args.command} ...")
    if extra:
        commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(
    argv: list[str] | None = None, out: TextIO | None = None, *, own_process: bool = False
) -> int:
    """Runs the command the arguments name and returns its exit status.

    Args:
        argv: The arguments after the program's name; default: ``sys.argv[1:]``.
        out: Where every command prints; default: ``sys.stdout`` when it is called.
        own_process: The command has the process to itself and the process ends with
            it (``python -m versatil.sweep``): a sweep releases Ray as soon as its trials
            are over, while the summary is printed.

    Raises:
        ConfigError: for bad input (``versatil.cli_common.run_main`` prints it, status 2).
        SystemExit: argparse's exit for ``--help`` and bad arguments.
    """
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    args.argv, args.own_process = list(argv), own_process
    out = sys.stdout if out is None else out
    command = SUBCOMMANDS.get(args.command, run)
    return command.main(args, out)
