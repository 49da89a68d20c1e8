"""Trials on a shared GPU record it, are not ranked on that timing, and are re-timed whole.

Ray runs in a driver process of its own that declares one GPU (none is needed: the trials
train on the CPU); two trials of half a GPU each share it. Their first epochs overlap for
certain: the task makes them meet at both ends of it (tests/sweep/worker/meeting_task.py).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.conftest import REPO

TASK = "tests.sweep.worker.meeting_task:build"


@pytest.mark.slow  # a local Ray, a sweep of two trials, then the re-timing
def test_trials_sharing_a_gpu_record_it_and_the_end_re_times_them_on_a_whole_one(
    tmp_path, mlflow_sqlite
):
    sweep = {
        "name": "shared",
        "task": {
            "name": TASK,
            "params": {"n_episodes": 16, "horizon": 10, "width": 16, "meet": str(tmp_path / "m")},
        },
        "space": {"precision": ["32", "64"]},
        "objective": {"tolerance": 0.5},  # 64 is no worse: it stays in contention
        "resources": {"gpu": 0.5, "cpu": 1},
        "trainer": {"max_epochs": 2, "accelerator": "cpu", "compile_cache": False},
        "max_concurrent_trials": 2,
        "confirm": {"enabled": "on", "rounds": 2, "round_s": 0.1},
        "storage_path": str(tmp_path),  # its embedded store is mlflow_sqlite's copy
    }
    (tmp_path / "sweep.json").write_text(json.dumps(sweep))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # a Ray of its own
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="vgpu-", dir="/tmp")  # short socket paths
    command = [sys.executable, "-m", "tests.sweep.worker.shared_gpu_driver"]
    command += [str(tmp_path / "sweep.json"), str(tmp_path / "out.json")]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    finally:
        shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert "(GPU shared by 2 trials)" in done.stdout

    # Both trials met inside their first epoch: each saw two trials on its GPU.
    assert len(out["epochs"]) == 2
    for epochs in out["epochs"].values():
        first = epochs["0"]
        assert first["device_trials_max"] == 2.0 and 1.0 <= first["device_trials_mean"] <= 2.0
        assert first["throughput_shared"] == 1.0
    for metrics in out["rows"].values():  # the last epoch: its fit was timed shared
        assert metrics["throughput_shared"] == 1.0 and metrics["status"] == "completed"

    # Their own timing ranks nothing; the re-timing, on a whole GPU, decides.
    assert out["calls_before_retiming"] == {"32 + eager": "reference", "64 + eager": "shared"}
    assert out["assigned_gpus"] == 1.0
    call, rounds = out["calls"]["64 + eager"]
    assert call in ("faster", "slower", "tie") and rounds == 2
    assert "2 paired rounds" in out["text"]
