"""Throughput and peak memory as a user's task gets them: any batch, steady state, own peak."""

import resource
import sys

import pytest
import torch

from tests.training.user_tasks import tokens_of
from versatil.training import metrics
from versatil.training.config import TrainConfig
from versatil.training.fit import train

USER_TASK = "tests.training.user_tasks:build"


def user_config(max_epochs=2, **params):
    return TrainConfig.from_mapping(
        {"task": USER_TASK, "params": params, "max_epochs": max_epochs, "accelerator": "cpu"}
    )


def assert_consistent(epoch):
    """samples_per_sec is recomputable from the raw numbers reported beside it."""
    if epoch["throughput_steps"]:
        assert epoch["samples_per_sec"] == pytest.approx(
            epoch["throughput_samples"] / epoch["throughput_time_s"]
        )
        assert 0 < epoch["throughput_time_s"] <= epoch["epoch_time_s"]
    else:
        assert epoch["throughput_samples"] == 0 and epoch["throughput_time_s"] == 0
        assert epoch["samples_per_sec"] == pytest.approx(
            epoch["samples_seen"] / epoch["epoch_time_s"]
        )


def test_dict_batches_count_samples_and_warm_up_is_left_out(tmp_path):
    # 40 samples in batches of 8: five batches an epoch; the first two of the fit warm up.
    result = train(user_config(n=40, batch_size=8), tmp_path, warmup_steps=2)
    first, second = result.history
    assert first["samples_seen"] == second["samples_seen"] == 40  # not 3 keys a batch
    assert (first["throughput_steps"], first["throughput_samples"]) == (3, 24)
    assert (second["throughput_steps"], second["throughput_samples"]) == (5, 40)
    for epoch in result.history:
        assert_consistent(epoch)


def test_a_validation_inside_the_epoch_is_not_training_time(tmp_path):
    # Eight batches an epoch, validated after the fourth (val_check_interval) and at the
    # epoch's end; each validation pauses 1 s, which no training time may include.
    config = TrainConfig.from_mapping(
        {
            "task": USER_TASK,
            "params": {"n": 64, "batch_size": 8, "val_pause_s": 1.0},
            "max_epochs": 2,
            "accelerator": "cpu",
            "trainer": {"val_check_interval": 4, "limit_val_batches": 1},
        }
    )
    result = train(config, tmp_path, warmup_steps=2)
    first, second = result.history
    assert (first["throughput_steps"], second["throughput_steps"]) == (6, 8)
    for epoch in result.history:
        assert_consistent(epoch)
        assert epoch["epoch_time_s"] < 1.0 and epoch["throughput_time_s"] < 1.0


def test_a_module_counts_its_own_samples(tmp_path):
    result = train(user_config(n=20, batch_size=5, tokens=True), tmp_path, warmup_steps=1)
    tokens = [tokens_of(i) for i in range(20)]
    for epoch in result.history:
        assert epoch["samples_seen"] == sum(tokens)
    # The first batch (samples 0-4) warmed up; the other three are measured.
    assert result.history[0]["throughput_samples"] == sum(tokens[5:])
    assert_consistent(result.history[0])


def test_epochs_shorter_than_the_warm_up_say_so_and_fall_back(tmp_path):
    # One batch an epoch, two warm-up batches: the first two epochs measure nothing.
    result = train(user_config(max_epochs=3, n=8, batch_size=8), tmp_path, warmup_steps=2)
    assert [e["throughput_steps"] for e in result.history] == [0, 0, 1]
    for epoch in result.history:
        assert epoch["samples_seen"] == 8 and epoch["samples_per_sec"] > 0
        assert_consistent(epoch)


def test_a_resumed_fit_warms_up_again(tmp_path):
    train(user_config(max_epochs=1), tmp_path, warmup_steps=2)
    resumed = train(
        user_config(max_epochs=2), tmp_path, ckpt_path=tmp_path / "last.ckpt", warmup_steps=2
    )
    (epoch,) = resumed.history
    assert epoch["epoch"] == 1 and epoch["throughput_steps"] == 3


@pytest.mark.skipif(sys.platform != "linux", reason="VmHWM is Linux's")
def test_cpu_peak_memory_is_each_epochs_own(tmp_path):
    assert metrics.reset_peak_rss(), "cannot write /proc/self/clear_refs"
    # One process: a fit that holds 300 MiB in every step, then a small one. A lifetime
    # peak (ru_maxrss) would report the first fit's peak for both.
    big = train(user_config(max_epochs=1, ballast_mb=300), tmp_path / "big")
    small = train(user_config(max_epochs=1), tmp_path / "small")
    big_peak, small_peak = big.metrics["peak_memory_mb"], small.metrics["peak_memory_mb"]
    assert big_peak - small_peak > 200, (big_peak, small_peak)


def test_without_a_peak_reset_the_lifetime_peak_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(metrics, "_CLEAR_REFS", tmp_path / "missing" / "clear_refs")
    assert not metrics.reset_peak_rss()
    lifetime = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert metrics.peak_rss_mb(since_reset=False) == pytest.approx(lifetime, rel=0.05)


def test_a_short_fit_says_its_throughput_is_too_short_to_trust(tmp_path):
    # 2 epochs of 5 batches of a tiny module: far less than three windows of 0.15 s.
    result = train(user_config(n=40, batch_size=8), tmp_path, warmup_steps=2)
    last = result.history[-1]
    assert last["throughput_window_s"] == metrics.WINDOW_S
    assert last["throughput_windows"] < metrics.MIN_WINDOWS
    assert last["throughput_too_short"] == 1.0
    assert last["torch_threads"] >= 1
    assert last["samples_per_sec_median"] > 0


def test_windows_give_a_median_with_its_interval():
    import lightning as L
    import torch

    module = L.LightningModule()
    monitor = metrics.ThroughputMonitor(warmup_steps=1, window_s=1e-9, min_windows=3)
    monitor.on_train_start(None, module)
    monitor.on_train_epoch_start(None, module)
    for index in range(9):  # the first warms up; each later one closes a window of its own
        monitor.on_train_batch_start(None, module, torch.zeros(4, 2), index)
        monitor.on_train_batch_end(None, module, None, torch.zeros(4, 2), index)
    monitor.on_train_epoch_end(None, module)
    epoch = monitor.epoch_metrics
    assert epoch["throughput_windows"] == 8 and epoch["throughput_too_short"] == 0.0
    low, high = epoch["samples_per_sec_ci_low"], epoch["samples_per_sec_ci_high"]
    assert 0 < low <= epoch["samples_per_sec_median"] <= high
    assert epoch["samples_per_sec_cv"] >= 0
    with pytest.raises(ValueError, match="window_s must be > 0"):
        metrics.ThroughputMonitor(window_s=0)


def _run_batches(monitor, module, sizes):
    """Trains ``module`` one batch per size, through the monitor's hooks, as a fit would."""
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
    monitor.on_train_start(None, module)
    monitor.on_train_epoch_start(None, module)
    try:
        for index, size in enumerate(sizes):
            batch = torch.randn(size, 4, generator=torch.Generator().manual_seed(index))
            monitor.on_train_batch_start(None, module, batch, index)
            module.net(batch).square().mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            monitor.on_train_batch_end(None, module, None, batch, index)
        monitor.on_train_epoch_end(None, module)
    finally:
        monitor.on_train_end(None, module)
    return monitor.epoch_metrics


def _mlp_module(compiled):
    import lightning as L

    module = L.LightningModule()
    module.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    if compiled:
        module.net.forward = torch.compile(module.net.forward)
    return module


@pytest.mark.slow
def test_a_batch_that_recompiled_is_in_no_throughput_window():
    from versatil.training.apply import reset_process_state

    # Batch 0 compiles (warm-up); batch 6's new batch size fails a guard and recompiles.
    sizes = [8] * 6 + [5] + [8] * 6
    results = {}
    for compiled in (False, True):
        reset_process_state(0)
        monitor = metrics.ThroughputMonitor(
            compiled=compiled, warmup_steps=1, window_s=1e-9, min_windows=3
        )
        results[compiled] = _run_batches(monitor, _mlp_module(compiled), sizes)
    eager, compiled = results[False], results[True]
    # Every batch past the warm-up closes a window of its own, but the one that recompiled.
    assert (eager["throughput_windows"], eager["throughput_compile_batches"]) == (12, 0)
    assert (compiled["throughput_windows"], compiled["throughput_compile_batches"]) == (11, 1)
    assert (compiled["throughput_steps"], compiled["throughput_samples"]) == (11, 88)
    assert eager["throughput_samples"] == 93
    assert_consistent(compiled)
    assert compiled["compile_time_s"] > 0 and "compile_time_s" not in eager


@pytest.mark.slow
def test_a_compiled_fit_leaves_its_recompiling_batch_out(tmp_path):
    # 44 samples in batches of 8: the short sixth batch of the first epoch recompiles.
    config = TrainConfig.from_mapping(
        {
            "task": USER_TASK,
            "params": {"n": 44, "batch_size": 8},
            "max_epochs": 2,
            "accelerator": "cpu",
            "compile_mode": "default",
        }
    )
    result = train(config, tmp_path, warmup_steps=2)
    first, second = result.history
    assert first["compile/recompiles"] >= 1
    assert (first["throughput_steps"], first["throughput_samples"]) == (3, 24)
    assert first["throughput_compile_batches"] == 1
    # The second epoch compiles nothing new: every batch is measured.
    assert (second["throughput_steps"], second["throughput_samples"]) == (6, 44)
    assert second["throughput_compile_batches"] == 1
    for epoch in result.history:
        assert_consistent(epoch)
