"""``python -m versatil.sweep``, paused inside its final logging (a fault injected for tests).

Usage: ``python -m tests.sweep.pausing_driver MARKER ARGS...``. After the end of the sweep
has logged its first checkpoint to MLflow, the driver touches MARKER and waits, so a test
can SIGKILL it there: mid-way through the end of the sweep, a moment no signal can hit
reliably from outside.
"""

import sys
import time
from pathlib import Path

from versatil.cli_common import run_cli
from versatil.sweep.cli.main import main
from versatil.sweep.tracking import reconcile

MARKER = Path(sys.argv[1])
_log_checkpoint = reconcile.log_checkpoint


def _paused(client, run_id, checkpoint_dir):
    _log_checkpoint(client, run_id, checkpoint_dir)
    MARKER.touch()
    time.sleep(600)  # killed long before


reconcile.log_checkpoint = _paused
sys.argv = [sys.argv[0], *sys.argv[2:]]
run_cli(main)
