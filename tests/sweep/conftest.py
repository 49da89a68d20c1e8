import pytest

from versatil.sweep.config.load import validate_sweep

TINY_TASK = {"name": "reaching", "params": {"n_episodes": 16, "horizon": 10, "width": 16}}


@pytest.fixture
def sweep_config(tmp_path):
    """Builds a small validated SweepConfig whose results go under tmp_path.

    The end-of-sweep re-timing is off unless a test asks for it (``confirm=...``): the
    tests of other features do not wait for it; tests/sweep/engine/test_confirm.py runs it.
    """

    def make(**fields):
        data = {
            "name": "t",
            "task": TINY_TASK,
            "trainer": {"max_epochs": 2, "accelerator": "cpu"},
            "storage_path": str(tmp_path / "runs"),
            "max_concurrent_trials": 2,
            "confirm": {"enabled": "off"},
            **fields,
        }
        return validate_sweep(data)

    return make
