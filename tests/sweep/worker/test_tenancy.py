"""The GPU registry counts the live trials on a GPU; a GPU accelerator needs a GPU from Ray."""

import subprocess
import sys

import pytest
import ray

from versatil.errors import ConfigError
from versatil.sweep.config.load import validate_sweep
from versatil.sweep.config.planning import make_plan
from versatil.sweep.worker import tenancy
from versatil.sweep.worker.gpus import require_given_gpu
from versatil.sweep.worker.tenancy import DeviceRegistry, gpu_tenancy


def dead_pid():
    """The id of a process that has ended (and was reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_registry_counts_live_holders_and_ignores_dead_ones(tmp_path):
    registry = DeviceRegistry.of("node/1", ["0"], root=tmp_path)
    other_gpu = DeviceRegistry.of("node/1", ["1"], root=tmp_path)
    assert registry.directory.parent == tmp_path and "/" not in registry.directory.name
    assert registry.count() == 0  # not made yet
    with registry.holding("trial_a"):
        assert registry.count() == 1
        with registry.holding("trial_b"), other_gpu.holding("trial_c"):
            assert registry.count() == 2 and other_gpu.count() == 1
            # A killed trial's file stays behind; its process is gone, so it is not counted.
            (registry.directory / "trial_dead").write_text(str(dead_pid()))
            (registry.directory / "torn").write_text("")
            assert registry.count() == 2
        assert registry.count() == 1
    assert registry.count() == 0
    assert sorted(p.name for p in registry.directory.iterdir()) == ["torn", "trial_dead"]


def test_a_holder_is_counted_by_its_own_process(tmp_path):
    registry = DeviceRegistry(tmp_path)
    with registry.holding("mine"), registry.holding("gone", pid=dead_pid()):
        assert (tmp_path / "mine").read_text().isdigit()
        assert registry.count() == 1


def sweep(gpu, accelerator="cpu"):
    config = validate_sweep(
        {"name": "x", "resources": {"gpu": gpu}, "trainer": {"accelerator": accelerator}}
    )
    return make_plan(config).trial


@pytest.mark.parametrize(("gpu", "shared"), [(0.25, True), (0.5, True), (1, False), (0, False)])
def test_only_a_share_of_a_gpu_is_registered(monkeypatch, tmp_path, gpu, shared):
    monkeypatch.setattr(tenancy.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(ray, "get_gpu_ids", lambda: [3])
    monkeypatch.setattr(
        ray, "get_runtime_context", lambda: type("C", (), {"get_node_id": lambda self: "n1"})()
    )
    with gpu_tenancy(sweep(gpu), "trial_a") as tenants:
        assert (tenants is not None) == shared
        if shared:
            assert tenants() == 1
            (held,) = (tmp_path / tenancy.REGISTRY_DIR).iterdir()
            assert held.name == "n1-gpu-3" and (held / "trial_a").exists()
    assert not list((tmp_path / tenancy.REGISTRY_DIR).glob("*/trial_a"))


@pytest.mark.parametrize("accelerator", ["gpu", "cuda"])
def test_a_gpu_accelerator_without_a_gpu_from_ray_is_refused(monkeypatch, accelerator):
    monkeypatch.setattr(ray, "get_gpu_ids", lambda: [])
    with pytest.raises(ConfigError) as error:
        require_given_gpu(accelerator, 0.5)
    assert str(error.value).startswith(
        f"trainer.accelerator: '{accelerator}' trains on a GPU, but Ray gave this trial none "
        "(resources.gpu: 0.5)"
    )
    require_given_gpu("cpu", 0)  # no GPU needed
    monkeypatch.setattr(ray, "get_gpu_ids", lambda: [0])
    require_given_gpu(accelerator, 0.5)
