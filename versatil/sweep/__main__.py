"""``python -m versatil.sweep``: the command-line entry point (see :mod:`versatil.sweep.cli`)."""

import sys

from versatil.cli_common import exit_now, run_main
from versatil.sweep.cli.main import main


def _entry() -> None:
    """Runs the command in a process of its own, and ends the process the moment it is done."""
    code = run_main(lambda argv: main(argv, own_process=True), sys.argv[1:])
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():  # a command that failed mid-sweep
        ray.shutdown()
    exit_now(code)


if __name__ == "__main__":
    _entry()
