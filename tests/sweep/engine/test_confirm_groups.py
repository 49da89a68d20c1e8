"""One model, one answer: two sweeps of one task give the same speed calls on shared settings.

The task's fits are too short to time (one batch an epoch), so every speed comes from the
end's re-timing; the second sweep's cap of 2 re-times its settings in two groups.
"""

import io
import json

import pytest

from versatil.cli_common import run_main
from versatil.sweep.cli.main import main
from versatil.sweep.engine.runner import run_sweep

# One batch an epoch, two epochs: at most 2 timing windows, fewer than the 3 a fit needs.
CONV = {
    "name": "tests.user_tasks.conv_classifier:build",
    "params": {
        "n_train": 32,
        "n_val": 32,
        "image_size": 16,
        "channels": 8,
        "blocks": 1,
        "batch_size": 32,
        "fp64_pause_s": 0.03,  # fp64 slower by construction, however loaded the machine
    },
}
# val_acc at 100% tolerance: every setting is no worse, so every one must be measured.
OBJECTIVE = {"metric": "val_acc", "mode": "max", "tolerance": 1.0}
SHARED = ("32 + eager", "64 + eager")  # fp64: slower, by its steps' pause


def sweep(sweep_config, mlflow_server, capsys, tmp_path, name, precisions, cap):
    """Runs a sweep over ``precisions`` (eager), re-timed; returns its report's settings."""
    config = sweep_config(
        name=name,
        task=CONV,
        objective=OBJECTIVE,
        space={"precision": precisions},
        confirm={"enabled": "auto", "rounds": 6, "round_s": 0.5, "max_candidates": cap},
    )
    stream = io.StringIO()
    outcome = run_sweep(config, stream=stream, tracking_uri=mlflow_server)
    assert {r.status for r in outcome.rows} == {"completed"}
    assert all(r.metrics["throughput_too_short"] == 1.0 for r in outcome.rows)
    capsys.readouterr()
    args = ["report", name, "--format", "json", "--tracking-uri", mlflow_server]
    assert run_main(main, [*args, "--output", str(tmp_path / name)]) == 0
    report = json.loads(capsys.readouterr().out)
    return stream.getvalue(), {s["label"]: s for s in report["settings"]}


@pytest.mark.slow  # two sweeps on the Ray cluster, each re-timed
def test_two_sweeps_of_one_task_give_the_same_calls_on_their_shared_settings(
    ray_cluster, mlflow_server, sweep_config, capsys, tmp_path
):
    one = ["32", "64", "bf16-true"]
    out_one, first = sweep(sweep_config, mlflow_server, capsys, tmp_path, "pair-a", one, 6)
    assert "confirm: re-timing 3 settings (32 + eager, " in out_one and "groups" not in out_one
    two = ["32", "64", "bf16-mixed"]
    out_two, second = sweep(sweep_config, mlflow_server, capsys, tmp_path, "pair-b", two, 2)
    assert "in 2 groups of at most 2, each with 32 + eager" in out_two

    # Every setting no worse has a speedup with its interval, from the paired rounds.
    for out, settings in ((out_one, first), (out_two, second)):
        for label, s in settings.items():
            if label == "32 + eager":
                continue
            assert s["no_worse"] and s["rounds"] == 6, (s, out)
            assert s["speedup_ci_low"] <= s["speedup"] <= s["speedup_ci_high"]
            assert s["speed"] in ("faster", "slower", "tie")
    # The settings both sweeps ran: the same call.
    calls = [
        {k: (s[k]["speed"], s[k]["speedup_ci_low"], s[k]["speedup_ci_high"]) for k in SHARED}
        for s in (first, second)
    ]
    print("calls:", calls)
    assert {k: first[k]["speed"] for k in SHARED} == {k: second[k]["speed"] for k in SHARED}, calls
