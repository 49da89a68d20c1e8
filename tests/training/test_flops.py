"""FLOPs of a training step, counted in the real fit (``versatil.training.hardware.flops``).

Every count here comes from a real Lightning fit: automatic optimization (dict and tuple
batches, conv nets, a Transformer counting tokens), manual optimization with two optimizers
on a streamed dataset with no length (``tests/user_tasks/gan.py``), and compiled forwards.
The expected counts are analytic, and for the automatic-optimization tasks also the exact
counts the project reported before counting moved into the fit.
"""

import importlib
import statistics

import lightning as L
import pytest
import torch
from torch._dynamo.utils import counters

from tests.training import hardware_tasks
from tests.user_tasks import gan
from versatil.training.config import TrainConfig
from versatil.training.fit import train
from versatil.training.hardware.flops import StepFlops, is_compiled

QUIET = dict(
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
GAN = "tests.user_tasks.gan:build"
GAN_PARAMS = {"n_samples": 512, "batch_size": 64}


def fit_count(module, data=None, callbacks=(), **overrides):
    """Fits ``module`` (one training batch unless told otherwise); the count of its first."""
    counter = StepFlops()
    options = dict(max_steps=1, limit_val_batches=0, **QUIET)
    options.update(overrides)
    trainer = L.Trainer(callbacks=[counter, *callbacks], **options)
    trainer.fit(module, datamodule=data)
    return counter.count


def config(task, **overrides):
    data = {"task": task, "max_epochs": 2, "accelerator": "cpu", **overrides}
    params = data.get("params", {})
    if task == GAN:  # a stream with no length: its epoch is counted in batches
        batches = params.get("n_samples", 4096) // params.get("batch_size", 128)
        data["trainer"] = {"limit_train_batches": batches}
    return TrainConfig.from_mapping(data)


# -- automatic optimization: the counts are unchanged --------------------------------------


def test_a_dict_batch_mlp_counts_its_analytic_flops_in_the_fit():
    count = fit_count(*hardware_tasks.build_mlp({}))
    assert count.reason is None and count.samples == 64
    assert count.flops == 286_720  # as counted on an eager copy before
    assert count.per_sample == pytest.approx(hardware_tasks.mlp_flops_per_sample(), rel=0.02)
    # Training is about 3x the forward: forward, weight gradients, input gradients.
    forward = sum(2 * i * o for i, o in hardware_tasks.MLP_LAYERS)
    assert 2.5 * forward < count.per_sample <= 3 * forward


def test_a_conv_net_counts_its_analytic_flops_in_the_fit():
    count = fit_count(*hardware_tasks.build_conv({}))
    assert count.reason is None and count.samples == 32
    assert count.flops == 15_138_816  # as counted on an eager copy before
    assert count.per_sample == pytest.approx(hardware_tasks.conv_flops_per_sample(), rel=0.02)


def test_a_module_that_cannot_be_copied_is_counted():
    count = fit_count(*hardware_tasks.build_locked({}))
    assert count.reason is None and count.per_sample == hardware_tasks.mlp_flops_per_sample()


def _linear_stack(dims):
    """A Linear stack whose input needs no gradient: forward, weight and input gradients."""
    forward = sum(2 * i * o for i, o in dims)
    return 2 * forward + sum(2 * i * o for i, o in dims[1:])


def _transformer_per_token(length=12, e=16, hidden=32, vocab=16):
    """Lightning's demo Transformer (1 encoder, 1 decoder layer): every product's input
    needs its gradient (it comes from an embedding), so training is 3x the forward."""
    attention = 2 * length * 3 * e * e + 2 * (2 * length * length * e) + 2 * length * e * e
    feed_forward = 2 * (2 * length * e * hidden)
    cross = 2 * length * e * e + 2 * length * 2 * e * e + 2 * (2 * length * length * e)
    cross += 2 * length * e * e
    forward = attention + feed_forward  # encoder
    forward += attention + cross + feed_forward  # decoder
    forward += 2 * length * e * vocab  # the output projection
    return 3 * forward / length


def _conv_bn_per_sample(c=4):
    conv1, conv2, head = 2 * c * 16 * 16 * 9, 2 * c * 8 * 8 * c * 9, 2 * c * 2
    return 2 * (conv1 + conv2 + head) + conv2 + head


# name: (analytic FLOPs per sample, FLOPs of the first batch as counted before, samples)
CONFORMANCE_FLOPS = {
    "dict_batches": (_linear_stack([(8, 16), (16, 1)]), 19_456, 32),
    "own_dataloaders": (_linear_stack([(2, 8), (8, 2)]), 2_560, 16),
    "maximize": (_linear_stack([(2, 16), (16, 3)]), 13_312, 32),
    "conv_bn": (_conv_bn_per_sample(), 2_950_656, 32),
    # Per token: its count_samples counts tokens.
    "transformer": (_transformer_per_token(), 7_520_256, 192),
}


@pytest.mark.parametrize("name", sorted(CONFORMANCE_FLOPS))
def test_the_conformance_tasks_count_their_analytic_flops_in_the_fit(name):
    from tests.sweep.worker.test_user_models import TASKS

    task = TASKS[name]
    module_name, function = task.spec.split(":")
    built = getattr(importlib.import_module(module_name), function)(dict(task.params))
    module, data = built if isinstance(built, tuple) else (built, None)
    count = fit_count(module, data)
    per_sample, before, samples = CONFORMANCE_FLOPS[name]
    assert count.reason is None
    assert (count.flops, count.samples) == (before, samples)
    assert count.per_sample == pytest.approx(per_sample, rel=0.02)


# -- manual optimization, two optimizers, a streamed dataset ---------------------------------


def test_a_manual_optimization_gan_counts_its_analytic_flops_and_not_its_validation():
    module = gan.build(GAN_PARAMS)
    # Validation after every training batch, the first included: none of it is counted.
    count = fit_count(module, max_steps=-1, max_epochs=1, val_check_interval=1)
    assert count.reason is None and count.samples == 64
    assert count.per_sample == pytest.approx(gan.flops_per_sample(), rel=0.02)
    assert count.flops == 64 * gan.flops_per_sample()  # exactly what the counter counts


@pytest.mark.parametrize(
    "build", [hardware_tasks.build_mlp, gan.build], ids=["automatic", "manual"]
)
def test_counting_changes_no_training_result(build):
    def fit(counted):
        torch.manual_seed(0)
        built = build(dict(GAN_PARAMS))
        module, data = built if isinstance(built, tuple) else (built, None)
        callbacks = [StepFlops()] if counted else []
        trainer = L.Trainer(max_epochs=2, limit_val_batches=0, callbacks=callbacks, **QUIET)
        trainer.fit(module, datamodule=data)
        if counted:
            assert callbacks[0].count.reason is None
        return module.state_dict(), torch.get_rng_state()

    (weights, rng), (weights_counted, rng_counted) = fit(False), fit(True)
    assert torch.equal(rng, rng_counted)
    assert weights.keys() == weights_counted.keys()
    assert all(torch.equal(weights[k], weights_counted[k]) for k in weights)


def _own_windows(batch_times, warmup, window_s):
    """The module's own throughput windows, cut as the monitor cuts its own."""
    rates, samples, seconds = [], 0, 0.0
    previous = (None, None)  # (epoch, end) of the batch before
    for index, (epoch, n, start, end) in enumerate(batch_times):
        since = previous[1] if previous[0] == epoch else start
        previous = (epoch, end)
        if index < warmup:
            continue
        samples, seconds = samples + n, seconds + end - since
        if seconds >= window_s:
            rates.append(samples / seconds)
            samples, seconds = 0, 0.0
    return rates


@pytest.mark.slow  # three epochs of a GAN: about 1 s on an idle CPU, 30 s on a busy one
def test_a_gan_fit_reports_its_flops_and_the_throughput_it_saw_itself(tmp_path):
    # 96 batches: a few throughput windows on an idle machine, dozens on a busy one.
    params = {"n_samples": 2048, "batch_size": 64}
    result = train(config("tests.user_tasks.gan:build", max_epochs=3, params=params), tmp_path)
    assert result.status == "completed" and "flops" not in result.notes
    for epoch, metrics in enumerate(result.history):
        assert metrics["flops_per_sample"] == pytest.approx(gan.flops_per_sample(), rel=0.02)
        assert metrics["tflops"] > 0
        if epoch == 0:
            continue  # the warm-up's batches are the module's, not the monitor's
        # The same batches: the samples agree exactly, the rates within 10%.
        assert metrics["throughput_samples"] == metrics["truth/samples"] == 2048
        own = metrics["truth/samples"] / metrics["truth/span_s"]
        assert metrics["samples_per_sec"] == pytest.approx(own, rel=0.10), epoch
    last = result.history[-1]
    own = _own_windows(result.module.batch_times, 2, last["throughput_window_s"])
    assert len(own) == last["throughput_windows"] >= 1
    assert last["samples_per_sec_median"] == pytest.approx(statistics.median(own), rel=0.10)


# -- compiled forwards ----------------------------------------------------------------------


class FramesPerBatch(L.Callback):
    """Dynamo's count of frames it compiled (or tried to), after each training batch."""

    def __init__(self):
        self.frames = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.frames.append(counters["frames"]["total"])


def _compiled_gan():
    """The GAN with both networks compiled in place, as ``apply_settings`` compiles them
    (dynamo's ``eager`` backend: traced, not built, so the test stays fast)."""
    torch._dynamo.reset()
    counters.clear()
    module = gan.build(GAN_PARAMS)
    for network in (module.generator, module.discriminator):
        network.forward = torch.compile(network.forward, backend="eager")
    assert is_compiled(module)
    return module


def test_a_compiled_fit_counts_its_first_batch_eagerly_then_compiles():
    frames = FramesPerBatch()
    count = fit_count(
        _compiled_gan(), callbacks=[frames], max_steps=-1, max_epochs=1, limit_train_batches=3
    )
    assert count.reason is None and count.flops == 64 * gan.flops_per_sample()
    assert frames.frames[0] == 0 < frames.frames[1]  # compiled from the second batch on


def test_a_compiled_fit_of_one_batch_runs_it_compiled_and_says_why_it_is_not_counted():
    frames = FramesPerBatch()
    count = fit_count(
        _compiled_gan(), callbacks=[frames], max_steps=-1, max_epochs=1, limit_train_batches=1
    )
    assert count.flops is None and "one training batch" in count.reason
    assert len(frames.frames) == 1 and frames.frames[0] > 0  # its only batch ran compiled


@pytest.mark.slow  # torch.compile on CPU
def test_a_compiled_fit_counts_the_flops_of_its_eager_twin(tmp_path):
    task = "tests.training.hardware_tasks:build_conv"
    eager = train(config(task), tmp_path / "eager")
    compiled = train(config(task, compile_mode="default"), tmp_path / "compiled")
    assert compiled.history[-1]["compile/graphs"] >= 1  # it really ran compiled
    expected = hardware_tasks.conv_flops_per_sample()
    assert eager.metrics["flops_per_sample"] == pytest.approx(expected, rel=0.02)
    assert compiled.metrics["flops_per_sample"] == eager.metrics["flops_per_sample"]


@pytest.mark.slow  # torch.compile on CPU
def test_a_compiled_manual_optimization_fit_counts_the_analytic_flops(tmp_path):
    cfg = config("tests.user_tasks.gan:build", params=GAN_PARAMS, compile_mode="default")
    result = train(cfg, tmp_path)
    assert result.status == "completed" and "flops" not in result.notes
    last = result.history[-1]
    assert last["in_effect/compiled_ok"] == 1 and last["compile/graphs"] >= 1
    assert last["flops_per_sample"] == gan.flops_per_sample()


# -- what cannot be counted -----------------------------------------------------------------


class SkipsFirstEpoch(hardware_tasks.DictMLP):
    def on_train_batch_start(self, batch, batch_idx):
        return -1 if self.current_epoch == 0 else None  # Lightning: skip the epoch's rest


class FailsFirstStep(hardware_tasks.DictMLP):
    def training_step(self, batch, batch_idx):
        super().training_step(batch, batch_idx)
        raise RuntimeError("the user's step failed")


def _nothing_left_on():
    """No dispatch mode is left entered and dynamo's stance is the default again."""
    from torch._dynamo.eval_frame import _stance

    return torch._C._len_torch_dispatch_stack() == 0 and _stance.stance == "default"


def test_a_first_batch_that_never_ends_is_not_counted_and_leaves_no_counter_on():
    _, data = hardware_tasks.build_mlp({})
    count = fit_count(SkipsFirstEpoch(), data, max_steps=-1, max_epochs=2)
    assert count.flops is None and "did not run to its end" in count.reason
    assert _nothing_left_on()


def test_a_step_that_raises_leaves_no_counter_on():
    _, data = hardware_tasks.build_mlp({})
    with pytest.raises(RuntimeError, match="the user's step failed"):
        fit_count(FailsFirstStep(), data)
    assert _nothing_left_on()
    compiled = _compiled_gan()
    compiled.training_step = lambda batch, batch_idx: 1 / 0
    with pytest.raises(ZeroDivisionError):
        fit_count(compiled, max_steps=-1, max_epochs=1, limit_train_batches=2)
    assert _nothing_left_on()


def test_a_module_with_no_matrix_product_still_trains_with_the_reason(tmp_path):
    result = train(config("tests.training.hardware_tasks:build_elementwise"), tmp_path)
    assert result.status == "completed" and len(result.history) == 2
    assert all("flops_per_sample" not in m and "tflops" not in m for m in result.history)
    assert result.notes["flops"] == (
        "FLOPs not counted: the counter found no matrix product or convolution"
    )
