"""``--help`` and ``--dry-run`` import neither torch nor Lightning, Ray nor MLflow."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "lightning", "ray", "mlflow")

PROBE = """
import contextlib, io, sys
from versatil.sweep.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit_:
        code = exit_.code
print(code, *sorted(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--dry-run"], ["--config", "frontier", "--dry-run"], ["report", "--help"]],
    ids=" ".join,
)
def test_a_light_command_imports_nothing_heavy(argv):
    probe = PROBE.format(heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"], f"{argv}: imported {done.stdout.split()[1:]}"
