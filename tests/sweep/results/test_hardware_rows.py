from types import SimpleNamespace

from versatil.sweep.results.hardware import ceiling_metrics, ceiling_text, ceilings_of
from versatil.sweep.vocab.keys import HARDWARE_CEILING


def _row(key, tflops):
    ceiling = {"key": key, "tflops": tflops, "sizes": dict.fromkeys(tflops, 64)}
    return SimpleNamespace(metrics={HARDWARE_CEILING: {**ceiling, "measured_at": {}}})


def test_ceilings_merge_per_device_in_the_tables_order_whoever_measured_first():
    cpu = {"host": "h", "device": "cpu (1 threads)", "threads": 1}
    gpu = {"host": "h", "device": "NVIDIA H200"}
    rows = [
        _row(cpu, {"bf16": 1.1}),
        _row(cpu, {"fp64": 0.05, "fp32-highest": 0.2}),
        _row(gpu, {"fp16": 679.0}),
        SimpleNamespace(metrics={}),  # a trial that failed before it measured anything
    ]
    first, second = ceilings_of(rows)
    assert list(first["tflops"]) == ["fp32-highest", "bf16", "fp64"]
    assert second["tflops"] == {"fp16": 679.0}
    assert ceiling_text([first, second]).splitlines() == [
        "ceiling of cpu (1 threads) (TFLOP/s, measured): fp32-highest 0.2, bf16 1.1, fp64 0.05",
        "ceiling of NVIDIA H200 (TFLOP/s, measured): fp16 679",
    ]
    # Several devices: each metric names its device.
    assert set(ceiling_metrics([first, second])) == {
        "ceiling_tflops/cpu_1_threads_/fp32-highest",
        "ceiling_tflops/cpu_1_threads_/bf16",
        "ceiling_tflops/cpu_1_threads_/fp64",
        "ceiling_tflops/NVIDIA_H200/fp16",
    }
    assert ceiling_metrics([second]) == {"ceiling_tflops/fp16": [679.0]}
