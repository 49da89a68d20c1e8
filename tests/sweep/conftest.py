import json
import shutil
from pathlib import Path

import pytest

from versatil.sweep.config.load import validate_sweep

TINY_TASK = {"name": "reaching", "params": {"n_episodes": 16, "horizon": 10, "width": 16}}
CEILINGS = ".ceilings"


@pytest.fixture(scope="session")
def _ceilings_measured(tmp_path_factory) -> Path:
    """This test process's measured matmul ceilings, gathered from the sweeps that measured them."""
    return tmp_path_factory.mktemp("ceilings")


def _dtypes(path: Path) -> int:
    try:
        return len(json.loads(path.read_text()).get("tflops", {}))
    except (OSError, ValueError):
        return -1


def _gather(source: Path, into: Path) -> None:
    """Keeps each ceiling file of ``source`` that knows more dtypes than ``into``'s copy."""
    for path in source.glob("*.json"):
        if _dtypes(path) > _dtypes(into / path.name):
            shutil.copyfile(path, into / path.name)


@pytest.fixture
def sweep_config(request, tmp_path, _mlflow_sqlite_template, _ceilings_measured):
    """Builds a small validated SweepConfig whose results go under tmp_path.

    The end-of-sweep re-timing is off unless a test asks for it (``confirm=...``): the
    tests of other features do not wait for it; tests/sweep/engine/test_confirm.py runs it.

    A test that runs its sweep on the Ray cluster, under the default storage path, finds
    there what a second sweep on the same machine finds: the embedded MLflow store with
    its tables made (a copy of an empty one) and the device's matmul ceilings that an
    earlier sweep of this test process measured (the hardware tests measure their own, on
    storage paths of their own). Both are what a user's later sweeps read; making them
    again costs seconds of CPU per sweep.
    """
    runs = tmp_path / "runs"
    warm = "ray_cluster" in request.fixturenames

    def make(**fields):
        if warm and "storage_path" not in fields and not runs.exists():
            (runs / CEILINGS).mkdir(parents=True)
            shutil.copyfile(_mlflow_sqlite_template, runs / "mlflow.db")
            _gather(_ceilings_measured, runs / CEILINGS)
        data = {
            "name": "t",
            "task": TINY_TASK,
            "trainer": {"max_epochs": 2, "accelerator": "cpu"},
            "storage_path": str(runs),
            "max_concurrent_trials": 2,
            "confirm": {"enabled": "off"},
            **fields,
        }
        return validate_sweep(data)

    yield make
    if warm:
        _gather(runs / CEILINGS, _ceilings_measured)
