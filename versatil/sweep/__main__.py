"""``python -m versatil.sweep``: the command-line entry point (see :mod:`versatil.sweep.cli`)."""

from versatil.cli_common import run_cli
from versatil.sweep.cli.main import main

if __name__ == "__main__":
    run_cli(main)
