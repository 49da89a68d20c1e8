"""Benchmark: every precision x compile mode x matmul precision on one device, in one process.

The axes are those of ``sweeps/precision_matrix.yaml`` (read with versatil's sweep-file
reader, so ``all`` and ``exclude`` mean what they mean in a sweep). Each combination is
one real ``versatil.training.fit.train`` of two tasks: the built-in reaching task with the
sweep file's GPU-sized ``task.params`` (a 1024-wide, 4-deep MLP on batches of 4096), and a
user-style residual conv net with BatchNorm (``tests.user_tasks.conv_classifier``). Per
combination it records steady-state samples/s (the last epoch's), peak memory, compile
time, the final objective, the infeasibility reason where the device cannot run it, the
``in_effect/*`` checks of :mod:`versatil.training.in_effect` and the ``compile/*`` counts.
Neither Ray nor MLflow is imported: it runs where only torch, Lightning, pydantic and
PyYAML are installed. A GPU run, fitted into 8 minutes by its budget::

    python benchmarks/gpu_matrix.py --device cuda --budget-s 420

and the tiny CPU subset the tests run::

    python benchmarks/gpu_matrix.py --device cpu --subset --out /tmp/gpu_matrix-cpu.json

Combinations run most informative first (see :func:`priority`); once ``--budget-s`` is
spent no new one starts, and the JSON lists the rest as ``skipped``. It writes the JSON
(machine, axes, one row per task and combination), a PNG of samples/s per setting beside
it, and every fit's compile log (graph-break warnings and the like) to ``<out>.compile.log``.
Fractional GPUs (1, 2, 4 trials sharing one GPU) are Ray's resources and are recorded as
not yet measured.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import datetime
import gc
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# This checkout's versatil, and its tests package (the user-style task), come first.
sys.path.insert(0, str(REPO))

SWEEP_FILE = REPO / "sweeps" / "precision_matrix.yaml"
AXES = ("precision", "compile_mode", "matmul_precision")

CONV_TASK = "tests.user_tasks.conv_classifier:build"
# A ResNet-ish block stack on 32x32 images, batches of 512: enough work per step that
# the precision, not Python, sets the pace on a GPU.
CONV_GPU_PARAMS = {
    "n_train": 16384,
    "n_val": 2048,
    "image_size": 32,
    "channels": 64,
    "blocks": 3,
    "batch_size": 512,
    "eps": 1e-4,
}

# The CI subset: two feasible precisions and one that is infeasible on CPU, eager and
# default compile plus reduce-overhead (infeasible without CUDA), one matmul precision;
# tiny models, two epochs (the second one all steady state).
SUBSET_AXES = {
    "precision": ["32", "bf16-mixed", "16-mixed"],
    "compile_mode": ["none", "default", "reduce-overhead"],
    "matmul_precision": ["highest"],
}
SUBSET_TASKS = {
    "reaching": {"n_episodes": 24, "horizon": 20, "batch_size": 64, "width": 16, "eps": 1e-4},
    "conv": {
        "n_train": 128,
        "n_val": 32,
        "image_size": 8,
        "channels": 4,
        "blocks": 1,
        "batch_size": 32,
        "eps": 1e-4,
    },
}
SUBSET_EPOCHS = 2

FRACTIONAL_GPU = {
    "status": "not yet measured",
    "reason": (
        "1, 2 and 4 trials sharing one GPU are Ray Tune trials with a fractional "
        "resources.gpu; the GPU machine this script was written for has no Ray, and this "
        "script imports neither Ray nor MLflow"
    ),
}


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One model the matrix trains under every combination."""

    name: str
    task: str
    params: dict[str, Any]
    max_epochs: int
    objective: str = "val_loss"


@dataclasses.dataclass(frozen=True)
class Combo:
    """One task under one precision, compile mode and matmul precision (values as strings)."""

    task: TaskSpec
    precision: str
    compile_mode: str
    matmul_precision: str

    def label(self) -> str:
        return label(self.precision, self.compile_mode, self.matmul_precision)


def label(precision: str, compile_mode: str, matmul_precision: str) -> str:
    """``bf16-mixed / eager / highest``: a combination as tables and plots name it."""
    mode = "eager" if compile_mode == "none" else compile_mode
    return f"{precision} / {mode} / {matmul_precision}"


def read_axes(path: Path) -> tuple[dict[str, list[str]], dict[str, Any], int]:
    """The enum axes, the task params and max_epochs of a sweep file.

    Read by versatil's own sweep-file reader (PyYAML and pydantic, no Ray): ``all`` and
    ``exclude`` resolve to the values a sweep would run, ``none`` included.
    """
    from versatil.sweep import load_sweep

    sweep = load_sweep(path)
    axes = {name: [str(v) for v in sweep.space[name]] for name in AXES}
    return axes, dict(sweep.task.params), sweep.trainer.max_epochs


# What each fit reports of its device use (versatil.training.hardware).
HARDWARE_KEYS = ("flops_per_sample", "tflops", "ceiling_tflops", "ceiling_fraction",
                 "peak_tflops", "mfu", "joules_per_sample")  # fmt: skip

# Cheapest compile first: max-autotune benchmarks kernels and can take minutes.
MODE_RANK = ["none", "default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune"]
# Precisions whose matmuls run (partly) in float32, where the matmul precision matters.
FLOAT32_MATMULS = {"32", "16-mixed", "bf16-mixed"}


def priority(combo: Combo, axes: dict[str, list[str]]) -> tuple[int, ...]:
    """Where a combination comes in the run order: the most informative first.

    Tiers: (0) eager and default compile at the first matmul precision; (1) those two
    modes at the other matmul precisions, for precisions with float32 matmuls; (2) the
    other compile modes at the first matmul precision; (3) the rest with float32
    matmuls; (4) the rest (a matmul precision cannot change a bf16, fp16 or fp64 matmul).
    Within a tier: compile mode (cheapest compile first), matmul precision, precision;
    tasks alternate.
    """
    first_matmul = combo.matmul_precision == axes["matmul_precision"][0]
    cheap_mode = combo.compile_mode in ("none", "default")
    float32 = combo.precision in FLOAT32_MATMULS
    if first_matmul:
        tier = 0 if cheap_mode else 2
    elif float32:
        tier = 1 if cheap_mode else 3
    else:
        tier = 4
    mode_rank = MODE_RANK.index(combo.compile_mode) if combo.compile_mode in MODE_RANK else 9
    return (
        tier,
        mode_rank,
        axes["matmul_precision"].index(combo.matmul_precision),
        axes["precision"].index(combo.precision),
    )


def machine_info(device_type: str) -> dict[str, Any]:
    import lightning
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "lightning": lightning.__version__,
        "python": platform.python_version(),
        "cuda": torch.version.cuda,
        "device_type": device_type,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if device_type == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(
            device_name=torch.cuda.get_device_name(0),
            compute_capability=f"{props.major}.{props.minor}",
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            cudnn=torch.backends.cudnn.version(),
        )
        try:
            import triton

            info["triton"] = triton.__version__
        except ImportError:
            info["triton"] = None
    else:
        info["device_name"] = "CPU"
    return info


def run_combo(
    combo: Combo, accelerator: str, device: Any, compile_log: Path, ceilings: Any
) -> dict[str, Any]:
    """Trains one combination; returns its row (never raises for a failed fit)."""
    from versatil.training.config import TrainConfig
    from versatil.training.fit import InfeasibleError, train
    from versatil.training.in_effect import SettingsNotInEffectError

    row: dict[str, Any] = {
        "task": combo.task.name,
        "precision": combo.precision,
        "compile_mode": combo.compile_mode,
        "matmul_precision": combo.matmul_precision,
    }
    config = TrainConfig.from_mapping(
        {
            "task": combo.task.task,
            "params": combo.task.params,
            "precision": combo.precision,
            "compile_mode": combo.compile_mode,
            "matmul_precision": combo.matmul_precision,
            "max_epochs": combo.task.max_epochs,
            "accelerator": accelerator,
        }
    )
    reason = config.settings.infeasibility_reason(device)
    if reason is not None:
        return {**row, "status": "infeasible", "reason": reason}
    history: list[dict[str, float]] = []
    unconfirmed: list[str] = []
    notes: dict[str, str] = {}
    workdir = Path(tempfile.mkdtemp(prefix="gpu-matrix-"))
    start = time.perf_counter()
    try:
        result = train(
            config,
            workdir / "checkpoint",
            on_epoch_end=lambda trainer, metrics: history.append(dict(metrics)),
            device=device,
            compile_log=compile_log,
            ceilings=ceilings,
        )
        status, reason, unconfirmed = str(result.status), "", result.unconfirmed
        notes = result.notes
        del result
    except InfeasibleError as error:  # the check above already says; kept for safety
        status, reason = "infeasible", error.reason
    except SettingsNotInEffectError as error:
        status, reason = "failed", str(error)
    except Exception as error:  # one combination's crash must not end the matrix
        status, reason = "failed", f"{type(error).__name__}: {error}".splitlines()[0][:500]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    row.update(status=status, reason=reason, wall_s=round(time.perf_counter() - start, 2))
    row.update(summarize(history, combo.task.objective))
    if unconfirmed:
        row["in_effect_unconfirmed"] = unconfirmed
    if notes:
        row["hardware_notes"] = notes
    _free_memory()
    return row


def summarize(history: list[dict[str, float]], objective: str) -> dict[str, Any]:
    """A row's measurements from its epochs' metrics."""
    if not history:
        return {"epochs": 0}
    last = history[-1]
    return {
        "epochs": len(history),
        "samples_per_sec": last.get("samples_per_sec"),
        "peak_memory_mb": max(m.get("peak_memory_mb", 0.0) for m in history),
        "compile_time_s": last.get("compile_time_s"),
        "objective": last.get(objective),
        **{key: last.get(key) for key in HARDWARE_KEYS},
        "in_effect_ok": last.get("in_effect/ok") == 1.0,
        "in_effect": {
            k.partition("/")[2]: v for k, v in last.items() if k.startswith("in_effect/")
        },
        "compile": {k.partition("/")[2]: v for k, v in last.items() if k.startswith("compile/")},
    }


def _free_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table; each distinct reason once, as a numbered note below."""
    headers = ["task", "precision", "compile", "matmul", "status", "samples/s", "TFLOP/s",
               "% ceiling", "MFU %", "J/sample", "peak MB", "compile s", "objective",
               "in effect", "graphs", "breaks", "recompiles"]  # fmt: skip
    reasons: list[str] = []
    body = []
    for r in rows:
        status = r["status"]
        if r.get("reason"):
            if r["reason"] not in reasons:
                reasons.append(r["reason"])
            status = f"{status} ({reasons.index(r['reason']) + 1})"
        compile_ = r.get("compile", {})
        ok = r.get("in_effect_ok")
        body.append(
            [r["task"], r["precision"], r["compile_mode"], r["matmul_precision"], status,
             r.get("samples_per_sec"), r.get("tflops"), _percent(r.get("ceiling_fraction")),
             _percent(r.get("mfu")), r.get("joules_per_sample"),
             r.get("peak_memory_mb"), r.get("compile_time_s"),
             r.get("objective"), None if ok is None else ("yes" if ok else "NO"),
             compile_.get("graphs"), compile_.get("graph_breaks"), compile_.get("recompiles")]
        )  # fmt: skip
    notes = "".join(f"\n({i}) {reason}" for i, reason in enumerate(reasons, 1))
    return markdown(headers, body) + ("\n" + notes if notes else "")


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None else round(100 * fraction, 1)


def ceiling_table(ceiling: dict[str, Any], peak: dict[str, Any] | None) -> str:
    """The measured ceiling per compute dtype beside the published dense peak."""
    peaks = (peak or {}).get("tflops", {})
    body = [
        [dtype, round(tflops, 2), ceiling["sizes"].get(dtype), peaks.get(dtype),
         _percent(tflops / peaks[dtype]) if peaks.get(dtype) else None]
        for dtype, tflops in ceiling["tflops"].items()
    ]  # fmt: skip
    headers = ["compute dtype", "measured TFLOP/s", "matrix n", "published TFLOP/s", "% of it"]
    return markdown(headers, body)


def markdown(headers: list[str], body: list[list[Any]]) -> str:
    """versatil's table formatter, or plain pipes where tabulate is not installed."""
    try:
        from versatil.tables import format_table
    except ImportError:  # a bare GPU machine: torch, Lightning and little else
        lines = [headers, ["---"] * len(headers)]
        lines += [["-" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)
                   for v in row] for row in body]  # fmt: skip
        return "\n".join("| " + " | ".join(map(str, line)) + " |" for line in lines)
    return format_table(headers, body, style="markdown")


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> Path | None:
    """Samples/s per setting, one panel per task; ``None`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    heights = [sum(1 for r in rows if r["task"] == t) for t in tasks]
    fig, axes = plt.subplots(
        len(tasks),
        1,
        figsize=(9, 1.5 + 0.22 * sum(heights)),
        squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )
    for ax, task in zip(axes[:, 0], tasks, strict=True):
        task_rows = [r for r in rows if r["task"] == task]
        labels = [
            label(r["precision"], r["compile_mode"], r["matmul_precision"]) for r in task_rows
        ]
        speeds = [r.get("samples_per_sec") or 0.0 for r in task_rows]
        colors = ["tab:blue" if r["status"] == "completed" else "lightgray" for r in task_rows]
        ax.barh(range(len(task_rows)), speeds, color=colors)
        for i, r in enumerate(task_rows):
            if r["status"] != "completed":
                ax.text(0, i, f"  {r['status']}", va="center", fontsize=7, color="dimgray")
        ax.set_yticks(range(len(task_rows)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(task, fontsize=9)
        ax.set_xlabel("samples/s (steady state, last epoch)", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def default_out(device_name: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device_name).strip("-").lower() or "device"
    date = datetime.date.today().strftime("%Y%m%d")
    return REPO / "benchmarks" / "results" / f"gpu_matrix-{slug}-{date}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--subset", action="store_true", help="the tiny CPU subset for CI")
    parser.add_argument("--out", type=Path, default=None, help="the JSON file to write")
    parser.add_argument(
        "--budget-s", type=float, default=None, help="start no new combination after this"
    )
    parser.add_argument("--sweep", type=Path, default=SWEEP_FILE, help="the axes' sweep file")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    import torch

    from versatil.cli_common import quiet_libraries
    from versatil.training import fit  # noqa: F401  (imports Lightning, which quiet_libraries needs)
    from versatil.training.spec import DeviceInfo

    quiet_libraries()

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    axes, sweep_params, sweep_epochs = read_axes(args.sweep)
    if args.subset:
        axes = SUBSET_AXES
        tasks = [
            TaskSpec("reaching", "reaching", SUBSET_TASKS["reaching"], SUBSET_EPOCHS),
            TaskSpec("conv", CONV_TASK, SUBSET_TASKS["conv"], SUBSET_EPOCHS),
        ]
    else:
        tasks = [
            TaskSpec("reaching", "reaching", sweep_params, sweep_epochs),
            TaskSpec("conv", CONV_TASK, CONV_GPU_PARAMS, sweep_epochs),
        ]
    accelerator = "gpu" if args.device == "cuda" else "cpu"
    device = DeviceInfo.detect(accelerator)
    machine = machine_info(device.type)
    out = args.out or default_out(machine["device_name"])
    out.parent.mkdir(parents=True, exist_ok=True)
    compile_log = out.with_suffix(".compile.log")
    compile_log.unlink(missing_ok=True)

    ceilings, ceiling, peak = measure_ceilings(axes, device.type)
    print(f"[{time.perf_counter() - started:6.1f}s] device ceiling measured:", flush=True)
    print(ceiling_table(ceiling, peak), flush=True)

    combos = [
        Combo(task, p, m, mm)
        for p in axes["precision"]
        for m in axes["compile_mode"]
        for mm in axes["matmul_precision"]
        for task in tasks
    ]
    combos.sort(key=lambda c: (*priority(c, axes), tasks.index(c.task)))
    rows: list[dict[str, Any]] = []
    report = {
        "script": "benchmarks/gpu_matrix.py",
        "command": " ".join(["python", "benchmarks/gpu_matrix.py", *(argv or sys.argv[1:])]),
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine,
        "sweep_file": str(
            args.sweep.relative_to(REPO) if args.sweep.is_relative_to(REPO) else args.sweep
        ),
        "subset": args.subset,
        "axes": axes,
        "tasks": {
            t.name: {
                "task": t.task,
                "params": t.params,
                "max_epochs": t.max_epochs,
                "objective": t.objective,
            }
            for t in tasks
        },
        "budget_s": args.budget_s,
        "wall_s": None,
        "finished": False,
        "rows": rows,
        "ceiling": ceiling,
        "published_peak": peak,
        "fractional_gpu": FRACTIONAL_GPU,
        "plot": None,
    }
    longest: dict[tuple[str, str], float] = {}  # (task, compile mode) -> longest wall so far
    for index, combo in enumerate(combos, 1):
        elapsed = time.perf_counter() - started
        left = None if args.budget_s is None else args.budget_s - elapsed
        expected = longest.get((combo.task.name, combo.compile_mode), 0.0)
        if left is not None and expected >= left and device_feasible(combo, device):
            rows.append(
                {
                    "task": combo.task.name,
                    "precision": combo.precision,
                    "compile_mode": combo.compile_mode,
                    "matmul_precision": combo.matmul_precision,
                    "status": "skipped",
                    "reason": f"time budget: {max(left, 0):.0f} s of {args.budget_s:.0f} s "
                    f"left at {elapsed:.0f} s; the longest earlier fit of this task and "
                    f"compile mode took {expected:.0f} s",
                }
            )
            continue
        row = run_combo(combo, accelerator, device, compile_log, ceilings)
        rows.append(row)
        if "wall_s" in row:
            key = (combo.task.name, combo.compile_mode)
            longest[key] = max(longest.get(key, 0.0), row["wall_s"])
        # Written after every fit: a run cut short (a machine's time limit) keeps its rows.
        report["wall_s"] = round(time.perf_counter() - started, 1)
        write_json(out, report)
        speed = row.get("samples_per_sec")
        print(
            f"[{time.perf_counter() - started:6.1f}s] {index}/{len(combos)} {combo.task.name} "
            f"{combo.label()}: {row['status']}"
            + (f" {speed:.4g} samples/s" if speed else "")
            + (f" ({row['reason']})" if row.get("reason") else ""),
            flush=True,
        )
    wall = time.perf_counter() - started
    figure = plot(
        rows, out.with_suffix(".png"), f"{machine['device_name']}, torch {torch.__version__}"
    )
    report.update(wall_s=round(wall, 1), finished=True, plot=figure.name if figure else None)
    write_json(out, report)
    print()
    print(ceiling_table(ceiling, peak))
    print()
    print(table(rows))
    counts = {
        s: sum(r["status"] == s for r in rows) for s in dict.fromkeys(r["status"] for r in rows)
    }
    print(f"\n{len(rows)} rows in {wall:.1f}s: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    print(f"results: {out}" + (f", plot: {figure}" if figure else ""))
    return 0


def measure_ceilings(axes: dict[str, list[str]], device_type: str) -> tuple[Any, dict, dict | None]:
    """Measures the device's matmul ceiling for every compute dtype of the axes, once.

    Returns the cache the fits read (a new directory, removed when the process ends:
    every run measures afresh), the ceiling as JSON, and the device's published dense
    peaks (``None`` when not listed).
    """
    import torch

    from versatil.training.hardware.ceiling import CeilingCache
    from versatil.training.hardware.dtypes import compute_dtype
    from versatil.training.hardware.peaks import peak_for
    from versatil.training.spec import TrialSettings

    dtypes = []
    for p in axes["precision"]:
        for mm in axes["matmul_precision"]:
            settings = TrialSettings.from_config({"precision": p, "matmul_precision": mm})
            dtype = compute_dtype(settings)
            if dtype is not None and dtype not in dtypes:
                dtypes.append(dtype)
    device = torch.device("cuda", 0) if device_type == "cuda" else torch.device("cpu")
    where = tempfile.mkdtemp(prefix="gpu-matrix-ceilings-")
    atexit.register(shutil.rmtree, where, ignore_errors=True)  # the fits read it to the end
    cache = CeilingCache(Path(where))
    ceiling = cache.get(device, dtypes).as_dict()
    peak = None
    if device_type == "cuda":
        found = peak_for(torch.cuda.get_device_name(0))
        peak = dataclasses.asdict(found) if found is not None else None
    return cache, ceiling, peak


def write_json(path: Path, report: dict[str, Any]) -> None:
    """Writes ``report`` whole or not at all (a reader never sees half a file)."""
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(report, indent=1) + "\n")
    partial.replace(path)


def device_feasible(combo: Combo, device: Any) -> bool:
    """Whether the combination's settings can run on ``device`` (an infeasible one costs
    nothing, so the budget never skips it: its reason is an answer, not a measurement)."""
    from versatil.training.spec import TrialSettings

    settings = TrialSettings.from_config(
        {
            "precision": combo.precision,
            "compile_mode": combo.compile_mode,
            "matmul_precision": combo.matmul_precision,
        }
    )
    return settings.infeasibility_reason(device) is None


if __name__ == "__main__":
    raise SystemExit(main())
