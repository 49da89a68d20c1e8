"""``python -m MODULE ARGS`` as a fresh process, forked from one that has imported the project.

A command of this project imports torch and Lightning (its task is checked at load), seconds
of CPU that every test running a command pays again. Here one helper process per test
process imports them once; each command is then a child forked from it: its own process,
working directory, environment, ``sys.argv``, output and exit status, as with
``subprocess.run([sys.executable, "-m", MODULE, *ARGS])``, but without the imports.

The helper runs no thread (it checks), so forking it is safe. A command that outlives its
timeout is killed with the helper, which the next command starts again.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HELPER = r"""
import json, os, runpy, sys, threading, traceback
import lightning.pytorch  # noqa: F401  (what every command imports)
import torch  # noqa: F401
import versatil.sweep.cli.main  # noqa: F401

assert threading.active_count() == 1, threading.enumerate()  # fork only a single thread
for line in sys.stdin:
    request = json.loads(line)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            for fd, name in ((1, "stdout"), (2, "stderr")):
                os.dup2(os.open(request[name], os.O_WRONLY | os.O_TRUNC), fd)
            sys.stdin = open(os.devnull)
            sys.argv = [request["module"], *request["args"]]
            sys.path.insert(0, request["cwd"])  # as `python -m` puts the working directory
            try:
                runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as stop:
                if stop.code is None or isinstance(stop.code, int):
                    code = stop.code or 0
                else:
                    print(stop.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)
"""

_helper: subprocess.Popen[str] | None = None


def _started(env: dict[str, str]) -> subprocess.Popen[str]:
    global _helper
    if _helper is None or _helper.poll() is not None:
        _helper = subprocess.Popen(
            [sys.executable, "-c", HELPER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            start_new_session=True,
        )
    return _helper


def _stop() -> None:
    global _helper
    if _helper is not None and _helper.poll() is None:
        os.killpg(_helper.pid, signal.SIGKILL)
        _helper.wait()
    _helper = None


def run_module(
    module: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Runs ``python -m module *args`` in ``cwd`` with ``env``, forked; returns its result.

    Raises:
        subprocess.TimeoutExpired: when it takes longer than ``timeout`` seconds (it is
            killed, with the helper).
    """
    helper = _started(env)
    with tempfile.TemporaryDirectory() as directory:
        out, err = Path(directory, "stdout"), Path(directory, "stderr")
        out.touch()
        err.touch()
        request = {
            "module": module,
            "args": args,
            "cwd": str(Path(cwd).resolve()),
            "env": env,
            "stdout": str(out),
            "stderr": str(err),
        }
        assert helper.stdin is not None and helper.stdout is not None
        helper.stdin.write(json.dumps(request) + "\n")
        helper.stdin.flush()
        ready, _, _ = select.select([helper.stdout], [], [], timeout)
        line = helper.stdout.readline() if ready else ""
        if not line:
            died = helper.poll() is not None
            _stop()
            if died:
                raise RuntimeError(f"the helper that forks commands exited ({helper.returncode})")
            raise subprocess.TimeoutExpired(["-m", module, *args], timeout)
        returncode = json.loads(line)["returncode"]
        return subprocess.CompletedProcess(
            [sys.executable, "-m", module, *args],
            returncode,
            out.read_text(errors="replace"),
            err.read_text(errors="replace"),
        )
