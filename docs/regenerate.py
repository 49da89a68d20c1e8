"""Runs the commands whose real output the documentation quotes, and saves what they print.

    python docs/regenerate.py              # every output
    python docs/regenerate.py tutorial     # one output, by name (several may be named)
    python docs/regenerate.py --list       # the outputs and their commands

Each output in :data:`OUTPUTS` is one command, run for real in a new temporary directory:
the repository files it needs are copied there first, at the same relative paths, so the
command is the one a page shows, typed in a checkout, and what it writes (a sweep's storage
path ``runs/sweeps`` and the embedded MLflow store in it) is its own. Variables that would
send it elsewhere or change what it prints (``MLFLOW_TRACKING_URI``, ``RAY_*``, ``CI``) are
left out of its environment. Its console output, stdout and stderr as a terminal
interleaves them, is written to ``docs/outputs/NAME.txt`` under one header line: the
command after a ``$`` prompt, then a comment with the date, the machine (CPU count and
model, torch version, GPU) and the command's wall time. The pages include these files
(``--8<-- "outputs/NAME.txt"``, pymdownx.snippets).

A command that fails leaves its file as it was; the script then exits with status 1.
To add an output, append an :class:`Output` to :data:`OUTPUTS` and include its file in a page.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT_DIR = ROOT / "docs" / "outputs"
# Left out of each command's environment: where results go, which Ray it joins, CI's flag.
DROPPED_VARIABLES = ("MLFLOW_TRACKING_URI", "CI")
DROPPED_PREFIXES = ("RAY_",)


@dataclasses.dataclass(frozen=True)
class Output:
    """One quoted output: a command, run in a directory holding copies of ``files``.

    Attributes:
        name: The output's name: ``docs/outputs/NAME.txt``, and the script's argument.
        command: The command as a page shows it; ``python`` runs as this interpreter.
        files: Repository paths copied into the directory the command runs in.
        timeout_s: How long the command may run.
    """

    name: str
    command: str
    files: tuple[str, ...] = ()
    timeout_s: float = 900.0

    @property
    def path(self) -> Path:
        """The file the output is written to."""
        return OUTPUT_DIR / f"{self.name}.txt"

    def argv(self) -> list[str]:
        """The command's arguments, ``python`` replaced by this interpreter."""
        words = shlex.split(self.command)
        return [sys.executable if word == "python" else word for word in words]


_TUTORIAL_FILES = ("examples/own_model/classifier.py", "examples/own_model/sweep.yaml")

OUTPUTS: tuple[Output, ...] = (
    Output(
        "tutorial-train",
        "python -m versatil.training --task examples.own_model.classifier:build "
        "--param lr=0.01 --max-epochs 2",
        _TUTORIAL_FILES,
    ),
    Output(
        "tutorial-dry-run",
        "python -m versatil.sweep --config examples/own_model/sweep.yaml --dry-run",
        _TUTORIAL_FILES,
    ),
    Output(
        "tutorial",
        "python -m versatil.sweep --config examples/own_model/sweep.yaml",
        _TUTORIAL_FILES,
    ),
)


def machine() -> str:
    """The machine in a few words: CPUs usable and their model, OS, torch, GPU."""
    import torch

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    words = [f"{cpus} CPUs"]
    model = _cpu_model()
    if model:
        words[0] += f" ({model})"
    words.append(f"{platform.system()} {platform.machine()}")
    words.append(f"torch {torch.__version__}")
    if torch.cuda.is_available():
        words.append(f"GPU {torch.cuda.get_device_name(0)}")
    else:
        words.append("no GPU")
    return ", ".join(words)


def _cpu_model() -> str | None:
    """The CPU's model name from ``/proc/cpuinfo``, where there is one."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return None


def environment() -> dict[str, str]:
    """This process's environment without the variables that would redirect a command."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in DROPPED_VARIABLES and not key.startswith(DROPPED_PREFIXES)
    }
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleave as they are written
    return env


def header(output: Output, when: datetime.datetime, about: str, wall_s: float) -> str:
    """The first line of an output file: the command, then when, where and how long."""
    return f"$ {output.command}  # {when:%Y-%m-%d}, {about}; {wall_s:.1f} s"


def regenerate(output: Output, about: str) -> bool:
    """Runs one output's command and writes its file; ``False`` when the command failed."""
    from versatil.files import atomic_write

    with tempfile.TemporaryDirectory(prefix="versatil-docs-") as directory:
        workdir = Path(directory)
        for name in output.files:
            (workdir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, workdir / name)
        when = datetime.datetime.now(datetime.UTC)
        print(f"{output.name}: {output.command} (in {workdir})", flush=True)
        start = time.perf_counter()
        result = subprocess.run(
            output.argv(),
            cwd=workdir,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=output.timeout_s,
            check=False,
        )
        wall_s = time.perf_counter() - start
    if result.returncode != 0:
        print(result.stdout[-4000:], file=sys.stderr)
        print(f"{output.name}: exit status {result.returncode}; left as it was", file=sys.stderr)
        return False
    text = header(output, when, about, wall_s) + "\n" + result.stdout.rstrip() + "\n"
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    atomic_write(output.path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    print(f"{output.name}: {wall_s:.1f} s, wrote {output.path.relative_to(ROOT)}", flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    """Regenerates the outputs named on the command line (all with none)."""
    by_name = {output.name: output for output in OUTPUTS}
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(by_name)}")
    parser.add_argument("--list", action="store_true", help="list the outputs and exit")
    args = parser.parse_args(argv)
    if args.list:
        for output in OUTPUTS:
            print(f"{output.name}: {output.command}")
        return 0
    unknown = [name for name in args.names if name not in by_name]
    if unknown:
        parser.error(f"no output named {', '.join(unknown)}; choose from {', '.join(by_name)}")
    chosen = [by_name[name] for name in args.names] or list(OUTPUTS)
    about = machine()
    failed = [output.name for output in chosen if not regenerate(output, about)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
