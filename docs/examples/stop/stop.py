"""A sweep stopped by SIGTERM mid-trial, as Kubernetes stops a pod, then resumed.

    python docs/examples/stop/stop.py

In a new temporary directory, beside copies of ``stop.yaml`` and ``stop_task.py``, it runs,
printing each command after a ``$`` prompt as a console would:

1. the sweep of ``stop.yaml``; once its trial with lr 0.01 is mid-way (its first epoch
   reported, see ``stop_task.py``), the sweep gets SIGTERM, and the session prints how
   long it took to exit;
2. the command the sweep's last line gives, which finishes it.

Every wait is for an observable state (a file the trial writes, the process's exit), none
for a clock.
"""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WAIT_S = 300.0


def _wait_for(path: Path, driver: subprocess.Popen) -> bool:
    """Waits until ``path`` exists; ``False`` if the driver ended first or it took too long."""
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if driver.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def session(workdir: Path) -> int:
    """The sweep, stopped mid-trial by SIGTERM, then the command that continues it."""
    for name in ("stop.yaml", "stop_task.py"):
        shutil.copyfile(HERE / name, workdir / name)
    args = ["--config", "stop.yaml"]
    print(f"$ python -m versatil.sweep {shlex.join(args)}", flush=True)
    driver = subprocess.Popen([sys.executable, "-m", "versatil.sweep", *args], cwd=workdir)
    if not _wait_for(workdir / "mid-way", driver):
        driver.kill()
        print("the trial never got mid-way", file=sys.stderr)
        return 1
    start = time.perf_counter()
    driver.send_signal(signal.SIGTERM)
    status = driver.wait(timeout=WAIT_S)
    print(f"(SIGTERM; exit status {status}, {time.perf_counter() - start:.1f} s after it)")
    if status != 143:
        return 1
    (workdir / "go").touch()
    again = [*args, "--resume"]
    print(f"$ python -m versatil.sweep {shlex.join(again)}", flush=True)
    command = [sys.executable, "-m", "versatil.sweep", *again]
    status = subprocess.run(command, cwd=workdir, check=False).returncode
    print(f"(exit status {status})", flush=True)
    return status


def main() -> int:
    """Runs the session in a new temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="versatil-stop-") as directory:
        return session(Path(directory))


if __name__ == "__main__":
    sys.exit(main())
