import pytest

from versatil.training.config import TrainConfig

SMALL = {"n_episodes": 16, "horizon": 10, "batch_size": 32, "width": 16}


@pytest.fixture
def small_config():
    """A reaching run that trains in well under a second."""

    def make(**overrides):
        data = {"params": dict(SMALL), "max_epochs": 2, "accelerator": "cpu", **overrides}
        return TrainConfig.from_mapping(data)

    return make
