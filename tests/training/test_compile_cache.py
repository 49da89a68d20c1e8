"""The compile cache: a graph compiled by one process is loaded, not compiled, by the next.

The two fits run in separate processes with separate inductor cache directories, as two
nodes of a cluster would: only the shared cache directory connects them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from versatil.training.compile_cache import CompileCache, cache_key
from versatil.training.constants import CompileMode, PrecisionType
from versatil.training.spec import DeviceInfo, TrialSettings

FIT = """
import json, sys, tempfile
from pathlib import Path
from versatil.training.compile_cache import CompileCache
from versatil.training.config import TrainConfig
from versatil.training.fit import train

config = TrainConfig.from_mapping({
    "params": {"n_episodes": 16, "horizon": 10, "batch_size": 32, "width": 16},
    "precision": sys.argv[2], "compile_mode": "default", "max_epochs": 1, "accelerator": "cpu",
})
result = train(config, Path(tempfile.mkdtemp()), compile_cache=CompileCache(Path(sys.argv[1])))
print("RESULT " + json.dumps(result.history[0]))
"""


def _fit_elsewhere(cache: Path, inductor_dir: Path, precision: str = "32") -> dict[str, float]:
    """A compiled fit in a new process with its own inductor cache (another node)."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(inductor_dir)}
    done = subprocess.run(
        [sys.executable, "-c", FIT, str(cache), precision],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


@pytest.mark.slow  # two compiled fits, each in a process of its own
def test_second_node_loads_the_first_nodes_graphs_instead_of_compiling(tmp_path: Path) -> None:
    cache = tmp_path / "shared"
    first = _fit_elsewhere(cache, tmp_path / "inductor-a")
    assert first["compile/cache_published"] == 1.0
    assert first["compile/cache_loaded"] == 0.0
    assert first["compile/fxgraph_cache_misses"] > 0
    bundles = list(cache.glob("*.bundle"))
    assert len(bundles) == 1

    second = _fit_elsewhere(cache, tmp_path / "inductor-b")
    assert second["compile/cache_loaded"] == 1.0
    assert second["compile/cache_published"] == 0.0
    # Every graph the second fit needed came from the first one's bundle.
    assert second["compile/fxgraph_cache_hits"] == first["compile/fxgraph_cache_misses"]
    assert second["compile/fxgraph_cache_misses"] == 0
    # On CPU the bundle carries the C++ kernels too: none was built again on node b.
    kernels_b = list((tmp_path / "inductor-b").glob("??/c*.so"))
    kernels_a = list((tmp_path / "inductor-a").glob("??/c*.so"))
    assert kernels_b and {p.name for p in kernels_b} <= {p.name for p in kernels_a}

    # Other settings are another key: compiled, and published beside the first.
    third = _fit_elsewhere(cache, tmp_path / "inductor-b", precision="bf16-mixed")
    assert third["compile/cache_loaded"] == 0.0 and third["compile/cache_published"] == 1.0
    assert len(list(cache.glob("*.bundle"))) == 2


def _session(cache: CompileCache, precision: str = "32"):
    import torch

    settings = TrialSettings(precision=PrecisionType(precision), compile_mode=CompileMode.DEFAULT)
    device = DeviceInfo.detect("cpu")
    return cache.session(settings, device, torch.nn.Linear(4, 2))


def test_a_trial_of_the_same_key_waits_for_the_compiling_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = CompileCache(tmp_path / "shared")
    # Two nodes: the same key, separate inductor caches.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "node-a"))
    first = _session(cache)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "node-b"))
    second = _session(cache)
    entered = threading.Event()

    def enter_second() -> None:
        second.__enter__()
        entered.set()

    with first:
        waiter = threading.Thread(target=enter_second, daemon=True)
        waiter.start()
        # Holding the lock, the first trial compiles; the second cannot get past it.
        assert not entered.wait(timeout=1.0)
    # The first ended without a bundle (as a failed trial would): the second compiles.
    assert entered.wait(timeout=60)
    assert second.wait_s >= 1.0
    assert not second.loaded and second._lock is not None
    second.__exit__(None, None, None)
    assert second._lock is None


def test_a_trial_stops_waiting_after_the_timeout_and_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "node-a"))
    holder = _session(CompileCache(tmp_path / "shared"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "node-b"))
    impatient = _session(CompileCache(tmp_path / "shared", wait_timeout_s=0.3))
    with holder, impatient:
        assert impatient.wait_s >= 0.3
        assert impatient._lock is None and not impatient.loaded


def test_on_the_holders_own_machine_and_cache_a_trial_does_not_wait(tmp_path: Path) -> None:
    # Inductor's own locks share each kernel between processes of one cache directory.
    cache = CompileCache(tmp_path, wait_timeout_s=600)
    holder, neighbour = _session(cache), _session(cache)
    with holder, neighbour:
        assert holder._lock is not None
        assert neighbour._lock is None and not neighbour.loaded
        assert neighbour.wait_s < 60  # did not wait for the holder (600 s bound)
    assert not holder._owner_path.exists()


def test_an_unreadable_bundle_is_compiled_over_not_fatal(tmp_path: Path) -> None:
    session = _session(CompileCache(tmp_path))
    session.bundle.parent.mkdir(parents=True, exist_ok=True)
    session.bundle.write_bytes(b"not a tar file")
    with session:
        assert not session.loaded
        assert session._lock is not None  # it compiles, and may replace the bundle
        assert session._replace


@pytest.mark.parametrize("change", ["precision", "width", "dtype"])
def test_key_changes_with_what_changes_the_graph(change: str) -> None:
    import torch

    device = DeviceInfo.detect("cpu")
    settings = TrialSettings(precision=PrecisionType.FP32, compile_mode=CompileMode.DEFAULT)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    base = cache_key(settings, device, model)
    assert base == cache_key(settings, device, model)
    if change == "precision":
        other = cache_key(
            TrialSettings(precision=PrecisionType.BF16_MIXED, compile_mode=CompileMode.DEFAULT),
            device,
            model,
        )
    elif change == "width":
        wider = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Linear(16, 2))
        other = cache_key(settings, device, wider)
    else:
        other = cache_key(settings, device, model.to(torch.float64))
    assert other != base
