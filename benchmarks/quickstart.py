"""Benchmark: the quickstart on a fresh machine, as a newcomer runs it.

Each run is ``python -m versatil.sweep`` (the zero-argument quickstart) in a new process
with a new empty ``HOME``, a new empty inductor cache (``TORCHINDUCTOR_CACHE_DIR``) and a
new working directory (so a new storage path, compile cache and MLflow store): nothing
compiled or stored before. Install time is not included. Variants run alternately, so
that they share the machine's conditions, e.g. with and without the compile cache::

    python benchmarks/quickstart.py --runs 2
    python benchmarks/quickstart.py --runs 2 --variant "no-cache=--set trainer.compile_cache=false"

or against another version of the code, checked out beside it (``git worktree add``)::

    python benchmarks/quickstart.py --runs 3 --tree "previous=/tmp/versatil-previous"

For each run it records the command's wall time, the sweep's own wall time (the summary's
"N trials in X s"), how many settings the end re-timed, and each compiled trial's
``compile_time_s``, ``compile/cache_wait_s`` and whether it loaded its graphs. It writes
JSON to ``--out`` (default ``benchmarks/results/quickstart-<date>.json``). Run it on an
otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

SUMMARY = re.compile(r"^(\d+) trials in ([0-9.]+)s")
RETIMED = re.compile(r"^confirm: re-timing (\d+) settings")


def compiled_trials(workdir: Path) -> list[dict[str, Any]]:
    """Each compiled trial's compile figures, from Tune's ``result.json`` files."""
    out = []
    for path in sorted(workdir.glob("runs/sweeps/*/*/result.json")):
        lines = path.read_text().splitlines()
        if not lines:
            continue
        first = json.loads(lines[0])
        config = first.get("config", {})
        if config.get("compile_mode") in (None, "none") or "compile_time_s" not in first:
            continue
        out.append(
            {
                "trial": path.parent.name,
                "precision": config.get("precision"),
                "lr": config.get("lr"),
                "compile_time_s": first.get("compile_time_s"),
                "cache_wait_s": first.get("compile/cache_wait_s"),
                "cache_loaded": first.get("compile/cache_loaded"),
            }
        )
    return out


def run_once(label: str, extra: list[str], tree: str | None = None) -> dict[str, Any]:
    """One quickstart in a fresh HOME, inductor cache and working directory.

    ``tree``: run the versatil package of that source tree instead of the installed one.
    """
    root = Path(tempfile.mkdtemp(prefix="vqs-"))
    home, workdir = root / "home", root / "work"
    home.mkdir()
    workdir.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "TRITON_CACHE_DIR": str(root / "triton"),
    }
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "versatil.sweep", *extra],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - start
    sweep_s = None
    retimed = None
    for line in done.stdout.splitlines():
        match = SUMMARY.match(line.strip())
        if match:
            sweep_s = float(match.group(2))
        match = RETIMED.match(line.strip())
        if match:
            retimed = int(match.group(1))
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
    return {
        "variant": label,
        "args": extra,
        "tree": tree,
        "exit_status": done.returncode,
        "wall_s": round(wall, 2),
        "sweep_s": sweep_s,
        "retimed_settings": retimed,
        "compiled_trials": compiled_trials(workdir),
    }


def main() -> int:
    """Runs the variants alternately, prints medians, writes the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of each variant")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="LABEL=ARGS: another variant, ARGS added to the command (repeatable)",
    )
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        help="LABEL=PATH: another variant, the code of the source tree at PATH (repeatable)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    variants: list[tuple[str, list[str], str | None]] = [("quickstart", [], None)]
    for text in args.variant:
        label, _, extra = text.partition("=")
        variants.append((label, shlex.split(extra), None))
    for text in args.tree:
        label, _, tree = text.partition("=")
        variants.append((label, [], str(Path(tree).resolve())))
    runs = []
    for i in range(args.runs):
        for label, extra, tree in variants:
            run = run_once(label, extra, tree)
            print(f"run {i + 1} {label}: {run['wall_s']:.1f} s (sweep {run['sweep_s']} s)")
            runs.append(run)
    medians = {
        label: statistics.median(r["wall_s"] for r in runs if r["variant"] == label)
        for label, _, _ in variants
    }
    stamp = time.strftime("%Y%m%d")
    out = args.out or Path(__file__).parent / "results" / f"quickstart-{stamp}.json"
    report = {
        "benchmark": "quickstart",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "versions": {p: metadata.version(p) for p in ("torch", "ray", "lightning", "mlflow")},
        "python": sys.version.split()[0],
        "median_wall_s": medians,
        "runs": runs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    for label, median in medians.items():
        print(f"{label}: median {median:.1f} s over {args.runs} runs")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
