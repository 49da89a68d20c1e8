"""benchmarks/gpu_matrix.py: its CPU subset end to end, and its time budget."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_matrix.py"

# Runs the script as `python benchmarks/gpu_matrix.py ...` would, then says whether Ray or
# MLflow was imported along the way (the GPU machine has neither).
RUN_AND_REPORT_IMPORTS = """
import runpy, sys
try:
    runpy.run_path(sys.argv.pop(1), run_name="__main__")
finally:
    print("heavy imports:", sorted(m for m in ("ray", "mlflow") if m in sys.modules))
"""


def load_script(monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_matrix", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the class is created.
    monkeypatch.setitem(sys.modules, "gpu_matrix", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # trains and compiles eight settings of two tasks
def test_cpu_subset_measures_every_feasible_combination(tmp_path):
    out = tmp_path / "gpu_matrix-cpu.json"
    command = [sys.executable, "-c", RUN_AND_REPORT_IMPORTS, str(SCRIPT)]
    args = ["--subset", "--device", "cpu", "--out", str(out)]
    done = subprocess.run(command + args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "heavy imports: []" in done.stdout
    report = json.loads(out.read_text())

    axes = report["axes"]
    expected = {
        (task, p, m, mm)
        for task in ("reaching", "conv")
        for p in axes["precision"]
        for m in axes["compile_mode"]
        for mm in axes["matmul_precision"]
    }
    rows = {(r["task"], r["precision"], r["compile_mode"], r["matmul_precision"]): r
            for r in report["rows"]}  # fmt: skip
    assert set(rows) == expected and len(report["rows"]) == len(expected) == 18
    for (_, precision, mode, _), row in rows.items():
        if precision == "16-mixed" or mode == "reduce-overhead":
            assert row["status"] == "infeasible"
            assert ("16-mixed is not supported on cpu" in row["reason"]) or (
                "captures CUDA graphs and needs a cuda device" in row["reason"]
            )
            continue
        assert row["status"] == "completed", row
        assert row["samples_per_sec"] > 0 and row["epochs"] == 2
        assert row["in_effect_ok"] is True
        assert set(row["in_effect"].values()) == {1.0}
        if mode == "none":
            assert row["compile"] == {} and row["compile_time_s"] is None
        else:
            assert row["compile"]["graphs"] >= 1
            assert row["compile"]["fell_back_to_eager"] == 0.0
            assert row["compile_time_s"] > 0

    assert report["machine"]["device_type"] == "cpu" and report["machine"]["torch"]
    assert report["fractional_gpu"]["status"] == "not yet measured"
    assert (tmp_path / report["plot"]).is_file()
    assert "| task" in done.stdout  # the markdown table


def test_spent_budget_starts_no_fit_but_still_answers_feasibility(tmp_path, monkeypatch):
    out = tmp_path / "budget.json"
    gpu_matrix = load_script(monkeypatch)
    assert (
        gpu_matrix.main(["--subset", "--device", "cpu", "--budget-s", "0", "--out", str(out)]) == 0
    )
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 18
    feasible = [
        r for r in rows if r["precision"] != "16-mixed" and r["compile_mode"] != "reduce-overhead"
    ]
    assert len(feasible) == 8
    assert all(r["status"] == "skipped" and "time budget" in r["reason"] for r in feasible)
    assert all(r["status"] == "infeasible" for r in rows if r not in feasible)
