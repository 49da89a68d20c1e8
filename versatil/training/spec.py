"""The settings spec: what a trial trains with, parsed, checked and named, without torch.

A trial's settings are its precision, compile mode and matmul precision. This module turns
user strings into them (:func:`parse_setting`, :meth:`TrialSettings.from_config`), says
whether a device can run them (:meth:`TrialSettings.infeasibility_reason`) and names them
(:func:`setting_label`). It imports neither torch nor Lightning (only
:meth:`DeviceInfo.detect` imports torch, when called), so the sweep driver can validate a
sweep file without them. Applying settings to torch is :mod:`versatil.training.apply`.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import shutil
from collections.abc import Mapping
from typing import Any, TypeVar

from versatil.training.constants import CompileMode, Float32MatmulPrecision, PrecisionType

__all__ = [
    "ACCELERATORS",
    "NONE",
    "SETTING_ENUMS",
    "DeviceInfo",
    "SettingsError",
    "TrialSettings",
    "parse_accelerator",
    "parse_enum",
    "parse_setting",
    "setting_label",
]

E = TypeVar("E", bound=enum.StrEnum)


class SettingsError(ValueError):
    """A setting that is not one of its enum's values; the message lists the choices."""


def choices(enum_type: type[enum.StrEnum]) -> str:
    """The values of ``enum_type`` as a comma-separated list for error messages."""
    return ", ".join(member.value for member in enum_type)


def parse_enum(field: str, value: object, enum_type: type[E]) -> E:
    """Turns a string (or a member) into a member of ``enum_type``.

    Args:
        field: The config field, named in the error message.
        value: The value given by the user.
        enum_type: The enum to parse into.

    Raises:
        SettingsError: naming the field, the value and the valid choices.
    """
    if isinstance(value, enum_type):
        return value
    try:
        return enum_type(str(value) if isinstance(value, int | float) else value)
    except ValueError:
        raise SettingsError(
            f"{field}: {value!r} is not a {enum_type.__name__}; choose from {choices(enum_type)}"
        ) from None


NONE = "none"
"""An optional setting left unset: eager for ``compile_mode``, torch's default for
``matmul_precision``. The one spelling of the eager sentinel in configs and params."""

SETTING_ENUMS: dict[str, type[enum.StrEnum]] = {
    "precision": PrecisionType,
    "compile_mode": CompileMode,
    "matmul_precision": Float32MatmulPrecision,
}


def parse_setting(field: str, value: object) -> enum.StrEnum | None:
    """Parses one of the :data:`SETTING_ENUMS` fields from user input.

    ``None`` means unset; for the optional fields (all but ``precision``) so does
    ``"none"`` in any case.

    Raises:
        SettingsError: naming the field, the value and the valid choices.
    """
    if value is None or (field != "precision" and str(value).lower() == NONE):
        return None
    return parse_enum(field, value, SETTING_ENUMS[field])


def setting_label(
    precision: PrecisionType | str,
    compile_mode: CompileMode | str | None = None,
    matmul_precision: Float32MatmulPrecision | str | None = None,
    *,
    show_matmul: bool | None = None,
) -> str:
    """A setting in words, the one spelling of it in tables, plots and verdicts.

    The parts are joined by ``" + "``: the precision, the compile mode (``eager`` when it is
    unset) and, when shown, ``matmul <precision>`` (``highest``, torch's default, when it is
    unset). Members and their string values give the same label; ``None`` and ``"none"``
    both mean unset.

    Examples:
        ``setting_label("32")`` is ``"32 + eager"``;
        ``setting_label(PrecisionType.BF16_MIXED, CompileMode.DEFAULT)`` is
        ``"bf16-mixed + default"``; ``setting_label("32", "default", "high")`` is
        ``"32 + default + matmul high"``; ``setting_label("32", None, None,
        show_matmul=True)`` is ``"32 + eager + matmul highest"``.

    Args:
        precision: The precision (``"32"``, ``PrecisionType.BF16_MIXED``, ...).
        compile_mode: The compile mode; ``None`` or ``"none"`` is eager.
        matmul_precision: The float32 matmul precision; ``None`` or ``"none"`` is
            ``highest``.
        show_matmul: Whether the matmul part is shown: ``True`` always (a table of settings
            whose matmul precision varies shows it on every row), ``False`` never, ``None``
            only when it is not ``highest``.

    Returns:
        The label, e.g. ``"bf16-mixed + default"``.
    """
    mode = "eager" if compile_mode in (None, NONE) else str(compile_mode)
    matmul = (
        Float32MatmulPrecision.HIGHEST.value
        if matmul_precision in (None, NONE)
        else str(matmul_precision)
    )
    parts = [str(precision), mode]
    if show_matmul or (show_matmul is None and matmul != Float32MatmulPrecision.HIGHEST.value):
        parts.append(f"matmul {matmul}")
    return " + ".join(parts)


ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps", "tpu")
"""The ``Trainer(accelerator=...)`` names Lightning accepts (its registry, plus auto and gpu)."""


def parse_accelerator(field: str, value: object) -> str:
    """Checks a Lightning accelerator name without importing Lightning.

    Raises:
        SettingsError: naming the field, the value and the valid choices.
    """
    if value not in ACCELERATORS:
        raise SettingsError(
            f"{field}: {value!r} is not an accelerator Lightning accepts; "
            f"choose from {', '.join(ACCELERATORS)}"
        )
    return str(value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeviceInfo:
    """What a worker's device can run; detected once per worker.

    Attributes:
        type: ``"cpu"``, ``"cuda"`` or ``"mps"`` (a ``torch.device`` type).
        name: A human-readable device name.
        bf16_supported: Whether the device computes in bfloat16.
        compiler_available: Whether ``torch.compile``'s inductor backend can build
            kernels here (a C++ compiler on CPU, Triton on CUDA).
    """

    type: str
    name: str
    bf16_supported: bool
    compiler_available: bool

    @classmethod
    def detect(cls, accelerator: str = "auto") -> DeviceInfo:
        """Detects the device Lightning would pick for ``accelerator``.

        ``cpu`` needs no torch (a dry run of a CPU sweep stays light); the others ask torch
        which accelerators it sees.
        """
        if accelerator == "cpu":
            return cls._cpu()
        import torch

        if accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available():
            return cls(
                type="cuda",
                name=torch.cuda.get_device_name(),
                bf16_supported=torch.cuda.is_bf16_supported(),
                compiler_available=importlib.util.find_spec("triton") is not None,
            )
        if accelerator in ("auto", "gpu", "mps") and torch.backends.mps.is_available():
            return cls(type="mps", name="Apple MPS", bf16_supported=True, compiler_available=False)
        return cls._cpu()

    @classmethod
    def _cpu(cls) -> DeviceInfo:
        """The CPU: bfloat16 always computes; inductor needs a C++ compiler."""
        return cls(
            type="cpu",
            name="CPU",
            bf16_supported=True,
            compiler_available=any(shutil.which(cc) for cc in ("g++", "c++", "clang++")),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialSettings:
    """How one trial trains.

    Attributes:
        precision: Lightning's ``Trainer(precision=...)``.
        compile_mode: ``torch.compile(mode=...)`` for the model's submodules; ``None``
            runs eagerly.
        matmul_precision: ``torch.set_float32_matmul_precision``; ``None`` keeps torch's
            default (``highest``).
    """

    precision: PrecisionType = PrecisionType.FP32
    compile_mode: CompileMode | None = None
    matmul_precision: Float32MatmulPrecision | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TrialSettings:
        """Builds settings from plain strings (a YAML file or a Ray Tune config).

        ``compile_mode`` and ``matmul_precision`` may be absent, ``None`` or ``"none"``.

        Raises:
            SettingsError: listing every bad field at once, each with its valid choices.
        """
        errors: list[str] = []
        parsed: dict[str, Any] = {}
        for field in SETTING_ENUMS:
            try:
                member = parse_setting(field, config.get(field))
            except SettingsError as error:
                errors.append(str(error))
            else:
                if member is not None:
                    parsed[field] = member
        if errors:
            raise SettingsError("; ".join(errors))
        return cls(**parsed)

    def to_config(self) -> dict[str, str | None]:
        """The settings as plain strings, the inverse of :meth:`from_config`."""
        return {
            "precision": self.precision.value,
            "compile_mode": self.compile_mode.value if self.compile_mode else None,
            "matmul_precision": self.matmul_precision.value if self.matmul_precision else None,
        }

    def as_axes(self) -> dict[str, str]:
        """The settings as a sweep's axes hold them, what runs by default filled in.

        Eager is ``"none"`` and torch's default matmul precision ``"highest"``: so
        ``TrialSettings().as_axes()`` is eager fp32, the baseline a sweep's settings are
        compared with.
        """
        matmul = self.matmul_precision or Float32MatmulPrecision.HIGHEST
        return {
            "precision": self.precision.value,
            "compile_mode": self.compile_mode.value if self.compile_mode else "none",
            "matmul_precision": matmul.value,
        }

    def label(self, show_matmul: bool | None = None) -> str:
        """These settings in words (``bf16-mixed + default``); see :func:`setting_label`.

        Args:
            show_matmul: Whether the matmul precision is shown; ``None`` shows it only
                when it is set to something other than ``highest``.
        """
        return setting_label(
            self.precision, self.compile_mode, self.matmul_precision, show_matmul=show_matmul
        )

    def infeasibility_reason(self, device: DeviceInfo) -> str | None:
        """Why these settings cannot train on ``device``, or ``None`` when they can."""
        precision, mode = self.precision, self.compile_mode
        if precision is PrecisionType.INT8:
            return (
                "precision 8 (INT8) cannot train: INT8 needs post-training quantization "
                "of a model trained in another precision"
            )
        if precision is PrecisionType.FP16_MIXED and device.type == "cpu":
            # Lightning warns "AMP with fp16 is not supported on CPU" and silently runs
            # bf16-mixed; a trial labelled 16-mixed would report bf16 numbers.
            return (
                "precision 16-mixed is not supported on cpu: Lightning would silently run "
                "bf16-mixed instead; choose bf16-mixed"
            )
        if precision in (PrecisionType.BF16_MIXED, PrecisionType.BF16_TRUE) and (
            not device.bf16_supported
        ):
            return f"precision {precision} needs bfloat16, which {device.name} does not support"
        if precision is PrecisionType.FP64 and device.type == "mps":
            return "precision 64 needs float64, which the mps device does not support"
        if mode is not None:
            if mode.uses_cuda_graphs() and device.type != "cuda":
                return (
                    f"compile mode {mode} captures CUDA graphs and needs a cuda device, "
                    f"not {device.type}; choose default or max-autotune-no-cudagraphs"
                )
            if not device.compiler_available:
                need = "Triton" if device.type == "cuda" else "a C++ compiler"
                return f"compile mode {mode} needs {need} on {device.type}, which is missing"
        return None
