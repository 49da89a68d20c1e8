"""resources.gpu: one GPU per trial by default with a GPU accelerator, none otherwise."""

import pytest

from versatil.errors import ConfigError
from versatil.sweep.config.load import load_sweep, validate_sweep
from versatil.sweep.config.sections import ResourcesSection


def sweep(**fields):
    return validate_sweep({"name": "x", **fields})


@pytest.mark.parametrize("accelerator", ["gpu", "cuda"])
def test_a_gpu_accelerator_gets_one_gpu_per_trial_by_default(accelerator):
    config = sweep(trainer={"accelerator": accelerator})
    assert config.resources.gpu == 1.0
    assert config.resources.gpus_for(accelerator) == 1.0
    assert not config.resources.shares_gpu(accelerator)


@pytest.mark.parametrize("accelerator", ["auto", "cpu", "mps", "tpu"])
def test_other_accelerators_get_no_gpu_by_default(accelerator):
    assert sweep(trainer={"accelerator": accelerator}).resources.gpu == 0.0


def test_a_gpu_share_given_is_kept():
    config = sweep(trainer={"accelerator": "gpu"}, resources={"gpu": 0.25})
    assert config.resources.gpu == 0.25 and config.resources.shares_gpu("gpu")
    assert sweep(resources={"gpu": 2}).resources.gpu == 2.0


def test_the_section_alone_resolves_against_the_accelerator():
    section = ResourcesSection()
    assert section.gpu is None
    assert (section.gpus_for("cuda"), section.gpus_for("auto")) == (1.0, 0.0)
    assert section.resolved("gpu").gpu == 1.0


@pytest.mark.parametrize("accelerator", ["gpu", "cuda"])
def test_no_gpu_for_a_gpu_accelerator_is_refused_at_load(tmp_path, accelerator):
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: x\nresources: {{gpu: 0}}\ntrainer: {{accelerator: {accelerator}}}\n")
    with pytest.raises(ConfigError) as error:
        load_sweep(path)
    assert str(error.value) == (
        f"{path}: resources.gpu: 0 gives each trial no GPU, but trainer.accelerator is "
        f"'{accelerator}'; give a GPU share above 0 (1, or a fraction such as 0.5 that trials "
        "share), leave resources.gpu out for 1, or set trainer.accelerator to cpu"
    )
    with pytest.raises(ConfigError, match=r"^sweep: resources\.gpu: 0 gives each trial no GPU"):
        sweep(resources={"gpu": 0.0}, trainer={"accelerator": accelerator})


def test_an_override_of_the_accelerator_brings_its_default(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("name: x\ntrainer: {accelerator: cpu}\n")
    assert load_sweep(path).resources.gpu == 0.0
    assert load_sweep(path, {"trainer.accelerator": "gpu"}).resources.gpu == 1.0
    with pytest.raises(ConfigError, match=r"resources\.gpu: 0 gives each trial no GPU"):
        load_sweep(path, {"trainer.accelerator": "gpu", "resources.gpu": 0})
