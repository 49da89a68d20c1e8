"""A trial's GPUs: the ones Ray gave it, checked before a GPU accelerator trains on them."""

from __future__ import annotations

from versatil.errors import ConfigError
from versatil.sweep.plan import GPU_ACCELERATORS

__all__ = ["given_gpus", "require_given_gpu"]


def given_gpus() -> list[str]:
    """The ids of the GPUs Ray gave this process's task or actor (empty: none)."""
    import ray

    return [str(gpu) for gpu in ray.get_gpu_ids()]


def require_given_gpu(accelerator: str, gpus: float) -> None:
    """Refuses to train on a GPU accelerator in a trial (or rank) Ray gave no GPU.

    Ray 2.60 leaves ``CUDA_VISIBLE_DEVICES`` as it found it for a task or actor that holds
    no GPU (``ray._private.utils.set_visible_accelerator_ids`` skips an accelerator with
    no ids, unless ``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1`` restores the old empty
    value). Such a trial would see every GPU of its node and train on one that Ray may
    have given another trial, or, where none is visible, fail inside Lightning. It ends
    here with the reason instead.

    Args:
        accelerator: The trial's ``trainer.accelerator``.
        gpus: The GPUs per trial (per worker) the sweep asked Ray for.

    Raises:
        ConfigError: with ``gpu`` or ``cuda`` and no GPU id from Ray.
    """
    if accelerator not in GPU_ACCELERATORS or given_gpus():
        return
    raise ConfigError(
        f"trainer.accelerator: {accelerator!r} trains on a GPU, but Ray gave this trial none "
        f"(resources.gpu: {gpus:g}); it would train on a GPU another trial may hold. Give "
        "trials a GPU share above 0 in resources.gpu, on a cluster whose nodes declare GPUs, "
        "or set trainer.accelerator to cpu"
    )
