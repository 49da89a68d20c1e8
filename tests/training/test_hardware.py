"""The device's measured ceiling, published peaks, energy counters, and a fit's FLOP/s.

How FLOPs are counted is tested in ``test_flops.py``.
"""

import pytest
import torch

from versatil.training.config import TrainConfig
from versatil.training.fit import train
from versatil.training.hardware.ceiling import CeilingCache, ceiling_key
from versatil.training.hardware.dtypes import COMPUTE_DTYPES, compute_dtype
from versatil.training.hardware.energy import EnergyCounter, open_counter
from versatil.training.hardware.peaks import PEAKS, peak_for
from versatil.training.spec import TrialSettings

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("precision", "matmul", "expected"),
    [
        ("32", None, "fp32-highest"),
        ("32", "high", "fp32-high"),
        ("32", "medium", "fp32-medium"),
        ("bf16-mixed", "high", "bf16"),
        ("16-mixed", None, "fp16"),
        ("bf16-true", None, "bf16"),
        ("16-true", "medium", "fp16"),
        ("64", "high", "fp64"),
        ("8", None, None),
    ],
)
def test_each_setting_has_the_compute_dtype_its_matmuls_run_in(precision, matmul, expected):
    settings = TrialSettings.from_config({"precision": precision, "matmul_precision": matmul})
    assert compute_dtype(settings) == expected
    assert expected is None or expected in COMPUTE_DTYPES


def config(task, **overrides):
    data = {"task": task, "max_epochs": 2, "accelerator": "cpu", **overrides}
    return TrainConfig.from_mapping(data)


def test_a_fit_reports_flops_achieved_tflops_and_its_share_of_the_ceiling(tmp_path):
    # The built-in task, wide enough that its matmuls are most of a step.
    cfg = config("reaching", params={"n_episodes": 64, "horizon": 20, "width": 256})
    ceilings = CeilingCache(tmp_path / "ceilings")
    result = train(cfg, tmp_path / "ckpt", ceilings=ceilings)
    for metrics in result.history:
        assert metrics["flops_per_sample"] > 0
        assert metrics["tflops"] == pytest.approx(
            metrics["flops_per_sample"] * metrics["samples_per_sec"] / 1e12
        )
        assert 0 < metrics["ceiling_fraction"] <= 1.1
        assert metrics["tflops"] <= 1.1 * metrics["ceiling_tflops"]
        assert "mfu" not in metrics  # no published peak is used for a CPU
    assert "cpu" in result.notes["mfu"]


def test_energy_per_sample_is_reported_exactly_when_a_counter_is_readable(tmp_path):
    counter, reason = open_counter(CPU)
    result = train(config("tests.training.hardware_tasks:build_mlp"), tmp_path)
    if counter is None:
        # No readable RAPL here: absent, never estimated, and the run says why.
        assert all("joules_per_sample" not in m for m in result.history)
        assert result.notes["energy"] == reason and "RAPL" in reason
    else:
        assert result.history[-1]["joules_per_sample"] > 0
        assert "energy" not in result.notes


def test_the_ceiling_is_measured_once_and_then_read_from_the_cache(tmp_path):
    cache = CeilingCache(tmp_path)
    first = cache.get(CPU, ["fp32-highest"], block_s=0.02)
    assert first.measured_now == ["fp32-highest"] and first.tflops["fp32-highest"] > 0
    path = cache.path(ceiling_key(CPU))
    written = path.stat().st_mtime_ns
    again = CeilingCache(tmp_path).get(CPU, ["fp32-highest"])
    assert again.measured_now == [] and again.tflops == first.tflops
    assert path.stat().st_mtime_ns == written
    # A dtype not measured yet is added, and the cached one is kept as it was.
    more = CeilingCache(tmp_path).get(CPU, ["fp32-highest", "fp64"], block_s=0.02)
    assert (
        more.measured_now == ["fp64"]
        and more.tflops["fp32-highest"] == first.tflops["fp32-highest"]
    )


def test_the_ceiling_key_names_host_device_torch_and_cpu_threads():
    key = ceiling_key(CPU)
    assert key["torch"] == torch.__version__ and key["threads"] == torch.get_num_threads()
    assert key["host"] and key["device"].startswith("cpu")
    # Plain values: a trial reports the key, and the driver unpickles it without torch.
    assert {type(v) for v in key.values()} <= {str, int}


@pytest.mark.parametrize(
    ("name", "entry", "bf16"),
    [
        ("NVIDIA H200", "H200 SXM", 989.5),
        ("NVIDIA H200 NVL", "H200 NVL", 835.5),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.5),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.0),
        ("NVIDIA A100-SXM4-80GB", "A100 (SXM4 and PCIe, 40 and 80 GB)", 312.0),
        ("NVIDIA A100 80GB PCIe", "A100 (SXM4 and PCIe, 40 and 80 GB)", 312.0),
        ("NVIDIA L4", "L4", 121.0),
        ("NVIDIA L40S", "L40S", 362.05),
    ],
)
def test_known_gpus_have_their_dense_datasheet_peaks(name, entry, bf16):
    peak = peak_for(name)
    assert peak is not None and peak.name == entry
    assert peak.tflops["bf16"] == bf16
    # TF32 is half the 16-bit rate; medium runs as TF32 on CUDA.
    assert peak.tflops["fp32-high"] == peak.tflops["fp32-medium"]
    assert peak.tflops["fp32-high"] == pytest.approx(bf16 / 2, rel=0.02)


def test_an_unlisted_gpu_has_no_peak_and_every_entry_cites_its_source():
    assert peak_for("NVIDIA GeForce RTX 4090") is None
    assert peak_for("NVIDIA L40") is None  # not the L40S
    for peak in PEAKS:
        assert peak.source.startswith("https://www.nvidia.com/")


def test_an_energy_counter_unwraps_and_sums_its_domains():
    readings = iter([[10.0, 5.0], [12.0, 1.0], [13.0, 2.0]])
    counter = EnergyCounter("test", lambda: next(readings), wrap=[0.0, 8.0])
    assert counter.joules() == pytest.approx(2.0 + 4.0)  # the second domain wrapped at 8
    assert counter.joules() == pytest.approx(6.0 + 1.0 + 1.0)


def test_the_first_measurement_covers_the_dtypes_a_sweep_adds(tmp_path):
    cache = CeilingCache(tmp_path, also=["fp64", "fp32-highest"])
    first = cache.get(CPU, ["fp32-highest"], block_s=0.02)
    assert first.measured_now == ["fp32-highest", "fp64"]
    assert CeilingCache(tmp_path).get(CPU, ["fp64"]).measured_now == []
