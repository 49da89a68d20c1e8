"""One training run end to end, and the ``python -m versatil.training`` command."""

import subprocess
import sys

import pytest

from versatil.training.__main__ import main
from versatil.training.fit import InfeasibleError, train

THROUGHPUT = {
    "samples_per_sec",
    "throughput_steps",
    "throughput_samples",
    "throughput_time_s",
    "samples_seen",
    "epoch_time_s",
    "peak_memory_mb",
}


def test_each_epoch_reports_objective_and_throughput(tmp_path, small_config):
    seen = []
    result = train(small_config(max_epochs=3), tmp_path, on_epoch_end=lambda t, m: seen.append(m))
    assert [m["epoch"] for m in seen] == [0, 1, 2] and result.history == seen
    for metrics in seen:
        assert {"val_loss", "train_loss", *THROUGHPUT} <= set(metrics)
        assert "compile_time_s" not in metrics
        assert metrics["samples_per_sec"] > 0
    # Every epoch sees the whole training set; the last one is measured on all of it.
    assert all(m["samples_seen"] == len(result.datamodule.train_set) for m in seen)
    last = seen[-1]
    assert last["throughput_samples"] == last["samples_seen"]
    assert last["samples_per_sec"] == pytest.approx(
        last["throughput_samples"] / last["throughput_time_s"]
    )
    assert seen[-1]["val_loss"] < seen[0]["val_loss"]


@pytest.mark.slow  # torch.compile on CPU: tens of seconds of inductor
def test_compiled_run_really_compiles_and_reports_compile_time(tmp_path, small_config):
    from torch._dynamo.utils import counters

    counters.clear()
    result = train(small_config(compile_mode="default"), tmp_path)
    assert counters["stats"]["unique_graphs"] >= 1
    assert result.metrics["compile_time_s"] > 0
    assert "compile_time_s" in result.history[0]


def test_fp16_true_with_default_adam_eps_diverges_and_stops(tmp_path, small_config):
    result = train(small_config(precision="16-true", max_epochs=3), tmp_path)
    assert result.status == "diverged"
    assert len(result.history) == 1


def test_fp16_true_with_larger_eps_trains(tmp_path, small_config):
    params = {"n_episodes": 16, "horizon": 10, "eps": 1e-4}
    assert train(small_config(precision="16-true", params=params), tmp_path).status == "completed"


def test_infeasible_settings_raise_with_reason(tmp_path, small_config):
    with pytest.raises(InfeasibleError, match="16-mixed is not supported on cpu"):
        train(small_config(precision="16-mixed"), tmp_path)


def test_resume_continues_from_last_checkpoint(tmp_path, small_config):
    train(small_config(max_epochs=2), tmp_path)
    resumed = train(small_config(max_epochs=4), tmp_path, ckpt_path=tmp_path / "last.ckpt")
    assert [m["epoch"] for m in resumed.history] == [2, 3]


def test_cli_prints_each_epoch_and_the_checkpoint(tmp_path, capsys):
    code = main(
        [
            "--max-epochs",
            "2",
            "--output",
            str(tmp_path),
            "--param",
            "n_episodes=16",
            "--accelerator",
            "cpu",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[:2] == ["epoch 0 done", "epoch 1 done"]
    out = out[2:]  # then the table of every epoch
    assert out[0].split() == [
        "epoch",
        "train_loss",
        "val_loss",
        "samples_per_sec",
        "epoch_time_s",
        "peak_memory_mb",
    ]
    assert [line.split()[0] for line in out[1:3]] == ["0", "1"]
    assert out[-1] == f"status: completed; checkpoint: {tmp_path}"


def test_cli_reports_infeasible_settings(tmp_path, capsys):
    assert main(["--precision", "16-mixed", "--accelerator", "cpu", "--output", str(tmp_path)]) == 1
    assert "infeasible: precision 16-mixed is not supported on cpu" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--precision", "bf16-mix"],
            "error: precision: 'bf16-mix' is not a PrecisionType; "
            "choose from 8, 32, 16-mixed, bf16-mixed, 16-true, bf16-true, 64",
        ),
        (
            ["--compile-mode", "fast"],
            "error: compile_mode: 'fast' is not a CompileMode; choose from "
            "default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs",
        ),
        (
            ["--task", "mypkg.tasks:make"],
            "error: task: 'mypkg.tasks:make' cannot be imported "
            "(no module named 'mypkg'); use a built-in task (reaching) or 'package.module:factory'",
        ),
    ],
)
@pytest.mark.slow  # each a fresh interpreter importing torch and Lightning: seconds apiece
def test_cli_bad_input_is_one_paragraph_without_traceback(args, message):
    result = subprocess.run(
        [sys.executable, "-m", "versatil.training", *args], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
