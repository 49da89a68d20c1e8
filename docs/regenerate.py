"""Runs the commands whose real output the documentation quotes, and saves what they print.

    python docs/regenerate.py              # every output
    python docs/regenerate.py tutorial     # one output, by name (several may be named)
    python docs/regenerate.py --list       # the outputs and their commands

Each output in :data:`OUTPUTS` is one command, run for real in a new temporary directory:
the repository files it needs are copied there first, at the same relative paths, and the
files a page shows whole (a ``<!-- file: NAME -->`` block) are written there under their
names, so the command is the one a page shows, typed in a checkout or beside those files,
and what it writes (a sweep's storage path ``runs/sweeps`` and the embedded MLflow store in
it) is its own. Commands an output needs first (the sweep that ``compress`` reads back) run
there before it, their output not kept. Variables that would send it elsewhere or change
what it prints (``MLFLOW_TRACKING_URI``, ``RAY_*``, ``CI``) are left out of its
environment. Its console output, stdout and stderr as a terminal interleaves them (without
the terminal's colour codes), is written to ``docs/outputs/NAME.txt`` under one header line:
the command after a ``$`` prompt, then a comment with the date, the machine (CPU count and
model, torch version, GPU) and the command's wall time. The pages include these files
(``--8<-- "outputs/NAME.txt"``, pymdownx.snippets). Files the command writes that a page
shows (a sweep's plots) are copied into ``docs/`` after it succeeds; the page's caption says
they come from the run whose output it includes.

A command that fails (an exit status other than the one expected, a kept file missing)
leaves its files as they were; the script then exits with status 1.
To add an output, append an :class:`Output` to :data:`OUTPUTS` and include its file in a page.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
OUTPUT_DIR = DOCS / "outputs"
# Left out of each command's environment: where results go, which Ray it joins, CI's flag.
DROPPED_VARIABLES = ("MLFLOW_TRACKING_URI", "CI")
DROPPED_PREFIXES = ("RAY_",)
# The line before a fenced block that is a whole file, as tests/docs/test_docs.py reads it.
FILE_ANNOTATION = re.compile(r"^<!--\s*file:\s*(\S+)\s*-->\s*$")
# Terminal escape sequences (Ray colours its workers' log prefixes): a terminal shows the
# text without them, and so do the pages.
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclasses.dataclass(frozen=True)
class Output:
    """One quoted output: a command, run in a directory holding copies of ``files``.

    Attributes:
        name: The output's name: ``docs/outputs/NAME.txt``, and the script's argument.
        command: The command as a page shows it; ``python`` runs as this interpreter.
        files: Repository paths copied into the directory the command runs in.
        page_files: Names of files a page shows whole (``<!-- file: NAME -->`` blocks),
            written into that directory.
        setup: Commands run there first, their output not kept (the sweep that a
            ``compress`` command reads back); each must exit with status 0.
        status: The exit status the command must end with (2: bad input on purpose).
        keep: Files the command writes that the docs show: a glob under its directory,
            matching one file, and the path under ``docs/`` it is copied to.
        timeout_s: How long each command may run.
    """

    name: str
    command: str
    files: tuple[str, ...] = ()
    page_files: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    status: int = 0
    keep: dict[str, str] = dataclasses.field(default_factory=dict)
    timeout_s: float = 900.0

    @property
    def path(self) -> Path:
        """The file the output is written to."""
        return OUTPUT_DIR / f"{self.name}.txt"

    def argv(self) -> list[str]:
        """The command's arguments, ``python`` replaced by this interpreter."""
        return argv(self.command)


def argv(command: str) -> list[str]:
    """A command's arguments, ``python`` replaced by this interpreter."""
    words = shlex.split(command)
    return [sys.executable if word == "python" else word for word in words]


_TUTORIAL_FILES = ("examples/own_model/classifier.py", "examples/own_model/sweep.yaml")
_INT8_SWEEP = "python -m versatil.sweep --config int8_pareto.yaml"
_FRONTIER = "python -m versatil.sweep --config frontier"

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
    Output(
        "quickstart",
        "python -m versatil.sweep",
        keep={
            "runs/sweeps/quickstart-*/report/objective_vs_throughput.png": (
                "objective_vs_throughput.png"
            )
        },
    ),
    Output("race", "python -m versatil.sweep --set search.algorithm=race"),
    Output(
        "frontier",
        _FRONTIER,
        keep={"runs/sweeps/frontier-*/report/pareto_front.png": "pareto_front.png"},
    ),
    Output(
        "frontier-int8",
        f"{_FRONTIER} --set post_training.int8=pareto",
        keep={"runs/sweeps/frontier-*/report/pareto_front.png": "pareto_front_int8.png"},
    ),
    Output("int8-pareto", _INT8_SWEEP, page_files=("int8_pareto.yaml",)),
    Output(
        "int8-compress",
        "python -m versatil.sweep compress int8-pareto --top 2 --backend torch.ao "
        "--storage-path runs/sweeps",
        page_files=("int8_pareto.yaml",),
        setup=(_INT8_SWEEP,),
    ),
    Output(
        "int8-compress-unknown-trial",
        "python -m versatil.sweep compress int8-pareto --trial 00000_00009 "
        "--storage-path runs/sweeps",
        page_files=("int8_pareto.yaml",),
        setup=(f"{_INT8_SWEEP} --set post_training.int8=none",),
        status=2,
    ),
    Output("training", "python -m versatil.training"),
    Output("training-bad-precision", "python -m versatil.training --precision bf16-mix", status=2),
    Output(
        "training-infeasible",
        "python -m versatil.training --precision 16-mixed --accelerator cpu",
        status=1,
    ),
    Output(
        "training-my-task",
        "python -m versatil.sweep --config my_sweep.yaml",
        page_files=("my_task.py", "my_sweep.yaml"),
    ),
    Output(
        "faq-infeasible-dry-run",
        "python -m versatil.sweep --set 'space.precision=[32, 16-mixed]' --dry-run",
    ),
    Output(
        "faq-no-tracking-server",
        "env MLFLOW_TRACKING_URI=http://127.0.0.1:9 python -m versatil.sweep",
        status=2,
    ),
    Output(
        "faq-task-not-importable",
        "python -m versatil.sweep --config my_sweep.yaml",
        page_files=("my_sweep.yaml",),
        status=2,
    ),
    Output("faq-unknown-field", "python -m versatil.sweep --set trainer.max_epoch=3", status=2),
    Output(
        "sweep-files-bad-input",
        "python -m versatil.sweep --set 'space.precision=[bf16-mix]' "
        "--set trainer.max_epoch=3 --dry-run",
        status=2,
    ),
    Output(
        "failures-mlflow-outage",
        "python docs/examples/mlflow_outage/outage.py",
        tuple(
            f"docs/examples/mlflow_outage/{name}"
            for name in ("outage.py", "outage.yaml", "outage_task.py")
        ),
        timeout_s=600.0,
    ),
    Output(
        "failures-sigterm",
        "python docs/examples/stop/stop.py",
        tuple(f"docs/examples/stop/{name}" for name in ("stop.py", "stop.yaml", "stop_task.py")),
        timeout_s=600.0,
    ),
)


def page_file(name: str) -> str:
    """The text of the file a page of ``docs/`` shows whole as ``<!-- file: NAME -->``.

    Raises:
        LookupError: when no page shows a file of that name.
    """
    for page in sorted(DOCS.rglob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines[:-1]):
            match = FILE_ANNOTATION.match(line)
            if match and match.group(1) == name and lines[number + 1].startswith("```"):
                end = lines.index("```", number + 2)
                return "\n".join(lines[number + 2 : end]) + "\n"
    raise LookupError(f"no page of {DOCS} shows a <!-- file: {name} --> block")


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


def prepare(output: Output, workdir: Path) -> None:
    """Copies the output's repository files into ``workdir`` and writes its page files."""
    for name in output.files:
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, workdir / name)
    for name in output.page_files:
        (workdir / name).write_text(page_file(name), encoding="utf-8")


def execute(command: str, workdir: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Runs one command in ``workdir``, stdout and stderr interleaved; status 124 on timeout."""
    try:
        return subprocess.run(
            argv(command),
            cwd=workdir,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        output = error.output.decode(errors="replace") if isinstance(error.output, bytes) else ""
        text = (output or "") + f"\n(stopped after {timeout_s:.0f} s)"
        return subprocess.CompletedProcess(error.cmd, 124, text)


def kept_files(output: Output, workdir: Path) -> dict[Path, Path] | str:
    """Each kept file's source under ``workdir`` and its path in ``docs/``, or what is wrong."""
    kept: dict[Path, Path] = {}
    for pattern, destination in output.keep.items():
        matches = sorted(workdir.glob(pattern))
        if len(matches) != 1:
            return f"{pattern} matched {len(matches)} files, not 1"
        kept[matches[0]] = DOCS / destination
    return kept


def failed(
    output: Output, command: str, result: subprocess.CompletedProcess[str], expected: int = 0
) -> bool:
    """Whether a command ended with another exit status than ``expected``, said on stderr."""
    if result.returncode == expected:
        return False
    print(result.stdout[-4000:], file=sys.stderr)
    print(
        f"{output.name}: {command}: exit status {result.returncode}, not {expected}; "
        "left as it was",
        file=sys.stderr,
    )
    return True


def regenerate(output: Output, about: str) -> bool:
    """Runs one output's commands and writes its files; ``False`` when one failed."""
    from versatil.files import atomic_write

    with tempfile.TemporaryDirectory(prefix="versatil-docs-") as directory:
        workdir = Path(directory)
        prepare(output, workdir)
        for command in output.setup:
            print(f"{output.name}: first {command} (in {workdir})", flush=True)
            if failed(output, command, execute(command, workdir, output.timeout_s)):
                return False
        when = datetime.datetime.now(datetime.UTC)
        print(f"{output.name}: {output.command} (in {workdir})", flush=True)
        start = time.perf_counter()
        result = execute(output.command, workdir, output.timeout_s)
        wall_s = time.perf_counter() - start
        if failed(output, output.command, result, output.status):
            return False
        kept = kept_files(output, workdir)
        if isinstance(kept, str):
            print(f"{output.name}: {kept}; left as it was", file=sys.stderr)
            return False
        printed = ESCAPE.sub("", result.stdout).rstrip()
        text = header(output, when, about, wall_s) + "\n" + printed + "\n"
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        atomic_write(output.path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        for source, destination in kept.items():
            destination.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(destination, lambda tmp, source=source: shutil.copyfile(source, tmp))
    written = [output.path, *kept.values()]
    names = ", ".join(str(path.relative_to(DOCS.parent)) for path in written)
    print(f"{output.name}: {wall_s:.1f} s, wrote {names}", flush=True)
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
