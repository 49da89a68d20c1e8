"""TrainConfig: everything one training run needs, and what ``config.yaml`` stores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from versatil.errors import ConfigError, describe_validation_error
from versatil.training.constants import CompileMode, Float32MatmulPrecision, PrecisionType
from versatil.training.spec import TrialSettings, parse_accelerator, parse_setting

__all__ = ["TrainConfig"]


class TrainConfig(pydantic.BaseModel):
    """One training run, fully resolved: written to ``config.yaml`` in every checkpoint."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    task: str = pydantic.Field(
        "reaching", description="Built-in task name or 'package.module:factory'."
    )
    params: dict[str, Any] = pydantic.Field(
        default_factory=dict, description="The task factory's params."
    )
    precision: PrecisionType = pydantic.Field(
        PrecisionType.FP32, description="Trainer(precision=...)."
    )
    compile_mode: CompileMode | None = pydantic.Field(
        None, description="torch.compile mode; none = eager."
    )
    matmul_precision: Float32MatmulPrecision | None = pydantic.Field(
        None, description="torch.set_float32_matmul_precision; none = highest."
    )
    seed: int = pydantic.Field(0, description="Seeds torch, numpy and Python for the run.")
    max_epochs: int | None = pydantic.Field(
        3, ge=1, description="Epochs to train; none: as many as trainer's budget allows."
    )
    accelerator: str = pydantic.Field(
        "auto", description="Lightning accelerator: auto, cpu, gpu, ..."
    )
    devices: int = pydantic.Field(1, ge=1, description="Devices per trial for Lightning.")
    trainer: dict[str, Any] = pydantic.Field(
        default_factory=dict,
        description="Further lightning.pytorch.Trainer arguments (max_steps, max_time, "
        "val_check_interval, gradient_clip_val, callbacks as class_path/init_args, ...), as "
        "versatil.training.trainer_options checked them.",
    )

    @pydantic.field_validator("precision", "compile_mode", "matmul_precision", mode="before")
    @classmethod
    def _parse_enum(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        return parse_setting(info.field_name, value)

    @pydantic.field_validator("accelerator", mode="before")
    @classmethod
    def _parse_accelerator(cls, value: Any) -> str:
        return parse_accelerator("accelerator", value)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], prefix: str = "") -> TrainConfig:
        """Validates ``data``, raising one :class:`ConfigError` that lists every problem."""
        try:
            return cls(**data)
        except pydantic.ValidationError as error:
            lines = describe_validation_error(error, prefix=prefix, fields=list(cls.model_fields))
            raise ConfigError("; ".join(lines)) from None

    @property
    def settings(self) -> TrialSettings:
        """The precision, compile mode and matmul precision of this run."""
        return TrialSettings(
            precision=self.precision,
            compile_mode=self.compile_mode,
            matmul_precision=self.matmul_precision,
        )

    def to_yaml_dict(self) -> dict[str, Any]:
        """Plain data (enum values as strings) for ``config.yaml`` and MLflow."""
        return self.model_dump(mode="json")
