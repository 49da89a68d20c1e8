"""TrialSettings: how a trial trains (precision, compile mode, matmul precision).

Settings are validated from strings, checked against the device a worker has, and applied
by exactly one function, :func:`apply_settings`, in the order that torch requires.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import shutil
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from versatil.training.constants import CompileMode, Float32MatmulPrecision, PrecisionType

if TYPE_CHECKING:
    import torch.nn as nn

__all__ = [
    "ACCELERATORS",
    "DeviceInfo",
    "SettingsError",
    "TrialSettings",
    "apply_settings",
    "compile_targets",
    "parse_accelerator",
    "parse_enum",
    "parse_setting",
    "reset_process_state",
]

E = TypeVar("E", bound=enum.StrEnum)
M = TypeVar("M", bound="nn.Module")


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
    if value is None or (field != "precision" and str(value).lower() == "none"):
        return None
    return parse_enum(field, value, SETTING_ENUMS[field])


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
        """Detects the device Lightning would pick for ``accelerator``."""
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


def reset_process_state(seed: int) -> None:
    """Undoes what an earlier trial in this process set, then seeds every RNG.

    Workers are reused across trials, and these settings are process-wide.
    """
    import lightning
    import torch

    from versatil.training.compile_health import reset_compile_counters

    torch.set_default_dtype(torch.float32)
    torch.set_float32_matmul_precision(Float32MatmulPrecision.HIGHEST.value)
    torch._dynamo.reset()
    # dynamo's reset leaves its statistics: a trial's compile health is its own only
    # when they start from zero too.
    reset_compile_counters()
    lightning.seed_everything(seed, workers=True, verbose=False)


def compile_targets(module: nn.Module) -> list[nn.Module]:
    """The submodules that ``torch.compile`` is applied to.

    A LightningModule may define ``compile_targets()``; by default every direct child
    that holds parameters is compiled. Compiling the whole LightningModule fails in
    dynamo.
    """
    custom = getattr(module, "compile_targets", None)
    if callable(custom):
        return list(custom())
    return [child for child in module.children() if any(True for _ in child.parameters())]


def apply_settings(settings: TrialSettings, build_model: Callable[[], M]) -> M:
    """Applies ``settings`` and builds the model: the one place that does so.

    Call it inside the worker process that trains, after :func:`reset_process_state`.

    Args:
        settings: The trial's settings (already checked for feasibility).
        build_model: Builds the (LightningModule) model in float32.

    Returns:
        The model, converted and compiled as the settings say.
    """
    import torch

    # (1) Matmul precision is process-wide: set it here, in the worker, never only in
    # the driver. None means torch's default, set explicitly so a reused worker does
    # not inherit the previous trial's value.
    matmul = settings.matmul_precision or Float32MatmulPrecision.HIGHEST
    torch.set_float32_matmul_precision(matmul.value)
    # (2) Build the model in float32.
    model = build_model()
    # (3) The *-true precisions train in the lower dtype throughout; the mixed ones keep
    # float32 parameters and Lightning's precision plugin autocasts.
    if settings.precision in (PrecisionType.FP16_TRUE, PrecisionType.BF16_TRUE, PrecisionType.FP64):
        model = model.to(settings.precision.get_model_dtype())
    # (4) Compile last, inside the worker: compiled modules do not pickle.
    # Each target's forward is compiled in place: state-dict keys stay unchanged (no
    # ``_orig_mod.`` prefix), so compiled and eager checkpoints are interchangeable.
    # (``nn.Module.compile()`` silently runs eagerly in torch 2.13: dynamo skips
    # ``Module._call_impl``.)
    if settings.compile_mode is not None:
        for target in compile_targets(model):
            target.forward = torch.compile(target.forward, mode=settings.compile_mode.value)
    return model
