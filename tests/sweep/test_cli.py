"""``python -m versatil.sweep`` with no arguments: the quickstart on a local Ray of its own."""

import os
import re
import subprocess
import sys


def test_zero_argument_quickstart_runs_locally_and_summarizes(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # The CLI as ``python -m`` runs it, plus a report at exit of what the driver imported.
    driver = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('driver imported:', "
        "sorted(m for m in ('torch', 'lightning', 'mlflow') if m in sys.modules)))\n"
        "sys.argv = ['versatil.sweep', '--set', 'trainer.max_epochs=1']\n"
        "runpy.run_module('versatil.sweep', run_name='__main__', alter_sys=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", driver],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert re.search(r"24 trials in [\d.]+s: 20 completed, 4 infeasible", out), out[-2000:]
    assert re.search(r"^best: \w+ val_loss=[\d.]+ precision=", out, re.MULTILINE)
    checkpoint = re.search(r"^best checkpoint: (.+)$", out, re.MULTILINE).group(1)
    assert checkpoint.startswith(str(tmp_path / "runs" / "sweeps" / "quickstart-"))
    assert os.path.isfile(os.path.join(checkpoint, "last.ckpt"))
    # The driver trains nothing: torch and Lightning load only in the workers.
    assert "driver imported: ['mlflow']" in out
    header = next(line for line in out.splitlines() if " trial " in line)
    for column in ("precision", "compile_mode", "lr", "val_loss", "samples_per_sec", "status"):
        assert column in header
