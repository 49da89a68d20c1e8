"""Settings verified in effect during the fit, and compile health, on CPU.

Compiling on CPU costs seconds per graph, so only two tests compile for real.
"""

import logging
import pickle

import pytest
import torch

from versatil.training.apply import apply_settings, compile_targets, reset_process_state
from versatil.training.compile_health import compile_logs_to, read_compile_counts
from versatil.training.fit import build_trainer, train
from versatil.training.in_effect import SettingsNotInEffectError, SettingsProbe
from versatil.training.spec import TrialSettings
from versatil.training.tasks import build_task

# fit_with_probe fits outside train(), which filters this Lightning deprecation itself.
pytestmark = pytest.mark.filterwarnings(r"ignore:.*isinstance\(treespec, LeafSpec\)")

CHECKS = {
    "in_effect/ok",
    "in_effect/param_dtype_ok",
    "in_effect/autocast_ok",
    "in_effect/matmul_precision_ok",
    "in_effect/compiled_ok",
}
COMPILE_KEYS = {
    "compile/graphs",
    "compile/graph_breaks",
    "compile/recompiles",
    "compile/fell_back_to_eager",
}


def fit_with_probe(config, probe_settings):
    """Fits ``config`` with a probe that expects ``probe_settings``; returns the probe."""
    reset_process_state(0)
    built = {}

    def build():
        built["model"], built["data"] = build_task(config.task, config.params)
        return built["model"]

    model = apply_settings(config.settings, build)
    probe = SettingsProbe(probe_settings, compile_targets(model))
    build_trainer(config, [probe]).fit(model, datamodule=built["data"])
    return probe


@pytest.mark.parametrize(
    ("precision", "autocast", "param_dtype"),
    [
        ("32", (False, None), torch.float32),
        ("bf16-mixed", (True, torch.bfloat16), torch.float32),
        ("bf16-true", (False, None), torch.bfloat16),
    ],
)
def test_eager_trial_confirms_its_precision(
    tmp_path, small_config, precision, autocast, param_dtype
):
    config = small_config(precision=precision, max_epochs=1)
    probe = fit_with_probe(config, config.settings)
    assert probe.observed_autocast == autocast
    assert probe.problems == []

    result = train(config, tmp_path / "checkpoint")
    assert {p.dtype for p in result.module.parameters()} == {param_dtype}
    assert {k: result.metrics[k] for k in CHECKS} == dict.fromkeys(CHECKS, 1.0)
    assert not COMPILE_KEYS & set(result.metrics)  # eager: no compile keys at all
    assert result.unconfirmed == []


@pytest.mark.parametrize(
    ("ran", "expected", "failed", "problem"),
    [
        ("32", "bf16-mixed", "autocast_ok", "ran without autocast, not under autocast to bf"),
        ("bf16-mixed", "32", "autocast_ok", "ran under autocast to bfloat16"),
        ("32", "bf16-true", "param_dtype_ok", "parameters in float32 where precision bf16-true"),
    ],
)
def test_probe_flags_a_precision_that_is_not_in_effect(
    small_config, ran, expected, failed, problem
):
    probe = fit_with_probe(
        small_config(precision=ran, max_epochs=1),
        TrialSettings.from_config({"precision": expected}),
    )
    assert probe.epoch_metrics[f"in_effect/{failed}"] == 0.0
    assert probe.epoch_metrics["in_effect/ok"] == 0.0
    assert [c.key for c in probe.checks if not c.ok] == [failed]
    assert problem in probe.fatal_problems[0]


def test_module_that_overrides_matmul_precision_fails_the_trial(tmp_path, small_config):
    reported = []
    config = small_config(task="tests.training.in_effect_tasks:own_matmul_precision", params={})
    with pytest.raises(SettingsNotInEffectError, match="float32 matmul precision is medium"):
        train(config, tmp_path / "checkpoint", on_epoch_end=lambda t, m: reported.append(m))
    # The epoch that found it was reported with its flags; no further epoch trained.
    assert len(reported) == 1
    assert reported[0]["in_effect/matmul_precision_ok"] == 0.0
    assert reported[0]["in_effect/ok"] == 0.0


def test_not_in_effect_error_survives_pickling():
    error = pickle.loads(pickle.dumps(SettingsNotInEffectError(["a problem", "another"])))
    assert error.problems == ["a problem", "another"]
    assert str(error) == "settings not in effect: a problem; another"


def test_compiled_trial_that_runs_eagerly_is_flagged_and_fails(tmp_path, small_config):
    reported = []
    config = small_config(
        task="tests.training.in_effect_tasks:never_compiled", params={}, compile_mode="default"
    )
    with pytest.raises(SettingsNotInEffectError, match="fell back to eager"):
        train(config, tmp_path / "checkpoint", on_epoch_end=lambda t, m: reported.append(m))
    [metrics] = reported
    assert metrics["compile/fell_back_to_eager"] == 1.0
    assert metrics["compile/graphs"] == 0.0
    assert metrics["in_effect/compiled_ok"] == 0.0
    assert "compile_time_s" not in metrics  # not reported as a compiled trial


def test_compiled_trial_reports_its_compile_health(tmp_path, small_config):
    result = train(small_config(compile_mode="default"), tmp_path / "checkpoint")
    metrics = result.metrics
    assert metrics["compile/graphs"] >= 1
    assert metrics["compile/fell_back_to_eager"] == 0.0
    assert metrics["compile/graph_breaks"] == 0.0
    # The reaching task's short last batch and validation's no_grad each recompile.
    assert metrics["compile/recompiles"] >= 1
    assert metrics["in_effect/compiled_ok"] == 1.0 and metrics["in_effect/ok"] == 1.0


def test_graph_break_is_counted_and_logged_to_the_trial_file(tmp_path, small_config, capfd):
    config = small_config(
        task="tests.training.in_effect_tasks:graph_break", params={}, compile_mode="default"
    )
    result = train(config, tmp_path / "checkpoint")
    assert result.metrics["compile/graph_breaks"] >= 1
    assert result.metrics["compile/fell_back_to_eager"] == 0.0
    assert result.metrics["in_effect/ok"] == 1.0
    log = (tmp_path / "checkpoint" / "compile.log").read_text()
    assert log.startswith("--- ") and "compile_mode=default" in log.splitlines()[0]
    assert "Graph break" in log
    assert "Graph break" not in capfd.readouterr().err


def test_reset_process_state_starts_compile_counters_from_zero():
    from torch._dynamo.utils import counters

    counters["stats"]["unique_graphs"] += 3
    counters["graph_break"]["a reason"] += 2
    reset_process_state(0)
    counts = read_compile_counts()
    assert (counts.graphs, counts.graph_breaks, counts.recompiles) == (0, 0, 0)


def test_compile_logs_go_to_the_file_and_handlers_come_back(tmp_path):
    logger = logging.getLogger("torch._dynamo")
    before = list(logger.handlers)
    path = tmp_path / "checkpoint" / "compile.log"
    with compile_logs_to(path, header="--- header"):
        assert not path.parent.exists()  # created at the first record only
        logging.getLogger("torch._dynamo.some.module").warning("a graph break")
    assert logger.handlers == before
    assert path.read_text().splitlines()[0] == "--- header"
    assert "WARNING torch._dynamo.some.module: a graph break" in path.read_text()


def test_cuda_graph_recordings_are_counted_from_dynamo_callbacks():
    from torch._dynamo.callback import CallbackTrigger, callback_handler

    from versatil.training.compile_health import CudaGraphRecordings

    recordings = CudaGraphRecordings()
    recordings.install()
    try:
        # What inductor's CUDA graph trees do around each recording (CUDA only).
        with callback_handler.install_callbacks(CallbackTrigger.CUDAGRAPH_RECORDING, "0/0"):
            pass
        with callback_handler.install_callbacks(CallbackTrigger.DYNAMO, "0/0"):
            pass
    finally:
        recordings.remove()
    assert recordings.count == 1


def test_cuda_only_checks_follow_the_settings():
    """The CUDA branches' logic, run on CPU by telling the probe it trained on CUDA."""
    settings = TrialSettings.from_config(
        {"precision": "32", "compile_mode": "reduce-overhead", "matmul_precision": "high"}
    )
    module = torch.nn.Linear(2, 2)
    module.forward = torch.compile(module.forward)  # never called: no graph
    probe = SettingsProbe(settings, [module])
    probe._device_type, probe.observed_autocast = "cuda", (False, None)
    reset_process_state(0)
    torch.set_float32_matmul_precision("high")
    try:
        checks, extra = probe._run_checks(module)
    finally:
        reset_process_state(0)
    ok = {c.key: c.ok for c in checks}
    assert ok["cuda_matmul_tf32_ok"] and ok["matmul_precision_ok"]
    assert not ok["cuda_graphs_ok"] and not ok["compiled_ok"]
    assert [c.key for c in checks if not c.fatal] == ["cuda_graphs_ok"]
    assert extra["in_effect/cuda_graphs"] == 0.0 and "in_effect/cudnn_allow_tf32" in extra
    assert extra["compile/fell_back_to_eager"] == 1.0
