"""The reference setting of a sweep: eager fp32 where its space lists it.

Every setting is compared with the reference. It is eager fp32 (precision ``32``, compile
mode ``none``, matmul precision ``highest``: training's own defaults); a settings axis of
the space that leaves out its eager fp32 value gives the reference its first listed value
instead, and the sweep says so when it loads (:func:`reference_note`).
"""

from __future__ import annotations

from versatil.sweep.config.axes import ENUM_AXES
from versatil.sweep.config.schema import SweepConfig
from versatil.training.spec import TrialSettings

__all__ = ["EAGER_FP32", "compares_settings", "reference_note", "reference_settings"]

EAGER_FP32 = TrialSettings().as_axes()
"""Eager fp32 as a sweep's settings axes hold it: the baseline every setting is compared with."""


def compares_settings(config: SweepConfig) -> bool:
    """Whether the sweep's space holds more than one setting (a settings axis with two values).

    A sweep of one setting (an lr search in ``bf16-mixed``, say) compares none: its trials
    are all the reference, and nothing about it needs to train first or be kept.
    """
    return any(len(config.space[name]) > 1 for name in ENUM_AXES if name in config.space)


def reference_settings(config: SweepConfig) -> dict[str, str]:
    """The reference's value on each settings axis of the space, by axis name.

    Eager fp32's value where the axis lists it, else the axis's first listed value. Axes
    the space leaves out are not named: every trial trains with their default, eager fp32's.
    """
    found = {}
    for name in ENUM_AXES:
        if name in config.space:
            values = config.space[name]
            found[name] = EAGER_FP32[name] if EAGER_FP32[name] in values else values[0]
    return found


def reference_note(config: SweepConfig) -> str | None:
    """What a sweep that compares settings without eager fp32 says when it loads; else ``None``.

    Returns:
        A sentence naming each settings axis that leaves out eager fp32's value and the
        reference the sweep uses instead (its first listed value on those axes).
    """
    if not compares_settings(config):
        return None
    reference = reference_settings(config)
    missing = [name for name, value in reference.items() if value != EAGER_FP32[name]]
    if not missing:
        return None
    left_out = ", ".join(f"space.{name} has no {EAGER_FP32[name]}" for name in missing)
    settings = TrialSettings.from_config(reference)
    return (
        f"{left_out}: this sweep has no eager fp32 baseline; its reference is "
        f"{settings.label(show_matmul='matmul_precision' in missing)}, each of those axes at "
        "its first listed value"
    )
