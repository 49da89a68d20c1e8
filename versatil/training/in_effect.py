"""Checks, inside the worker and during the fit, that a trial's settings are in effect.

``apply_settings`` and Lightning's precision plugin *ask* for a precision, a compile mode
and a matmul precision; :class:`SettingsProbe` looks at what the fit actually ran with and
reports it in every epoch's metrics as numeric flags (1.0 = confirmed, 0.0 = not), so they
are logged to MLflow beside the throughput they explain:

========================================  ==================================================
key                                       what it says
========================================  ==================================================
``in_effect/ok``                          every check below that applies here is confirmed
``in_effect/param_dtype_ok``              every floating-point parameter has the dtype the
                                          precision trains in: float32 for ``32`` and the
                                          mixed ones, float16 / bfloat16 / float64 for
                                          ``16-true`` / ``bf16-true`` / ``64``
``in_effect/autocast_ok``                 in the first training batch's forward (of the
                                          LightningModule or a compile target) autocast
                                          was on with the precision's dtype for the mixed
                                          precisions, and off for every other one
``in_effect/matmul_precision_ok``         ``torch.get_float32_matmul_precision()`` is the
                                          trial's (``highest`` when unset)
``in_effect/compiled_ok``                 compiled trials: every compile target's forward is
                                          the ``torch.compile`` wrapper and dynamo compiled
                                          at least one graph in this fit (so compiled code
                                          ran); eager trials: no target is compiled
``in_effect/cuda_matmul_tf32_ok``         CUDA only: ``torch.backends.cuda.matmul.allow_tf32``
                                          is on exactly for ``high`` and ``medium``
``in_effect/cudnn_allow_tf32``            CUDA only, a fact, not a check:
                                          ``torch.backends.cudnn.allow_tf32``; torch's default
                                          is on, and no matmul precision changes it, so
                                          convolutions may use TF32 even at ``highest``
``in_effect/cuda_graphs_ok``              CUDA and ``reduce-overhead`` / ``max-autotune`` only:
                                          at least one CUDA graph was recorded and inductor
                                          skipped none
``in_effect/cuda_graphs``                 the CUDA graphs recorded so far in the fit
``compile/graphs``                        compiled trials: FX graphs compiled in the fit
``compile/graph_breaks``                  compiled trials: graph breaks in the fit
``compile/recompiles``                    compiled trials: frames recompiled after a guard
                                          failed (a new batch size, say)
``compile/fell_back_to_eager``            compiled trials: 1.0 when the compiled forward is
                                          not in use (``in_effect/compiled_ok`` is 0)
``compile/cudagraph_skips``               CUDA graph modes on CUDA: graphs run without CUDA
                                          graphs
========================================  ==================================================

The ``compile/*`` counts are cumulative over the fit (see
:mod:`versatil.training.compile_health`); eager trials report no ``compile/*`` key, as
they report no ``compile_time_s``.

**A setting observed not in effect fails the trial.** When a check *contradicts* the
settings (a parameter in the wrong dtype, autocast off in a ``bf16-mixed`` forward, the
wrong matmul precision or TF32 flag, a compiled trial that fell back to eager) the epoch
is still reported with its flags, the fit stops, and ``train`` raises
:class:`SettingsNotInEffectError` naming every problem: its numbers would be labelled with
settings they were not measured under. Two outcomes only lower ``in_effect/ok``: autocast
that could not be observed (no forward of the module or of a compile target ran inside a
training batch), and CUDA graphs not recorded, whose signal has not yet been checked on a
GPU by this project.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import lightning as L
import torch
from torch import nn
from typing_extensions import override

from versatil.training.compile_health import CudaGraphRecordings, read_compile_counts
from versatil.training.constants import Float32MatmulPrecision, PrecisionType
from versatil.training.spec import TrialSettings

__all__ = [
    "Check",
    "SettingsNotInEffectError",
    "SettingsProbe",
    "expected_param_dtype",
    "is_compiled_forward",
]


class SettingsNotInEffectError(RuntimeError):
    """A trial's settings were observed not in effect; ``problems`` says which and how."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("settings not in effect: " + "; ".join(self.problems))

    def __reduce__(self) -> tuple[type, tuple[list[str]]]:
        # Ray pickles a trial's exception to the driver; the default would rebuild it from
        # the message, read as a sequence of one-character problems.
        return (type(self), (self.problems,))


@dataclasses.dataclass(frozen=True)
class Check:
    """One check of one setting.

    Attributes:
        key: The metric name under ``in_effect/``.
        ok: Whether the setting was confirmed in effect.
        problem: Why not, when not ``ok``.
        fatal: Whether a failure contradicts the settings (and fails the trial), rather
            than leaving them unconfirmed.
    """

    key: str
    ok: bool
    problem: str | None = None
    fatal: bool = True


def expected_param_dtype(precision: PrecisionType) -> torch.dtype:
    """The dtype a trial's floating-point parameters have while it trains.

    The mixed precisions keep float32 parameters (autocast lowers the ops); the ``*-true``
    ones and ``64`` convert the whole model.
    """
    if precision is PrecisionType.FP32 or precision.is_mixed():
        return torch.float32
    return precision.get_model_dtype()


def is_compiled_forward(module: nn.Module) -> bool:
    """Whether ``module.forward`` is a ``torch.compile`` wrapper (as ``apply_settings`` sets)."""
    return getattr(module.forward, "_torchdynamo_orig_callable", None) is not None


def _dtype_name(dtype: torch.dtype | None) -> str:
    return str(dtype).removeprefix("torch.")


class SettingsProbe(L.Callback):
    """Checks that the trial's settings are in effect; read :attr:`epoch_metrics`.

    Install it before the callback that collects the epoch's metrics: it computes them in
    ``on_train_epoch_end``. See the module docstring for the keys and for which failures
    fail the trial (:attr:`fatal_problems`).
    """

    def __init__(self, settings: TrialSettings, targets: Sequence[nn.Module]) -> None:
        """Sets up the probe.

        Args:
            settings: The trial's settings, as applied.
            targets: The model's compile targets (``compile_targets(model)``), compiled
                or not; their forward is where autocast is observed, besides the
                LightningModule's own.
        """
        self.settings = settings
        self.targets = list(targets)
        self.epoch_metrics: dict[str, float] = {}
        self.checks: list[Check] = []
        self.observed_autocast: tuple[bool, torch.dtype | None] | None = None
        self.cuda_graphs = CudaGraphRecordings()
        self._handles: list[Any] = []
        self._in_train_batch = False
        self._device_type = "cpu"

    # -- observing ------------------------------------------------------------------------

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._device_type = pl_module.device.type
        self.observed_autocast = None
        self._remove_hooks()
        # Each module once: a LightningModule may name itself as its compile target.
        modules = {id(m): m for m in (pl_module, *self.targets)}
        self._handles = [m.register_forward_pre_hook(self._observe) for m in modules.values()]
        if self._device_type == "cuda":
            self.cuda_graphs.install()

    @override
    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._in_train_batch = True

    @override
    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self._in_train_batch = False

    def _observe(self, module: nn.Module, args: Any) -> None:
        """A forward pre-hook: reads the autocast state the training forward runs under."""
        if not self._in_train_batch or self.observed_autocast is not None:
            return
        device = self._device_type
        enabled = torch.is_autocast_enabled(device)
        self.observed_autocast = (enabled, torch.get_autocast_dtype(device) if enabled else None)
        # Once per fit is enough: later batches run the same code and pay no hook.
        self._remove_hooks()

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    @override
    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._remove_hooks()
        self.cuda_graphs.remove()

    # -- checking -------------------------------------------------------------------------

    @override
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.checks, extra = self._run_checks(pl_module)
        metrics = {f"in_effect/{c.key}": float(c.ok) for c in self.checks}
        metrics["in_effect/ok"] = float(all(c.ok for c in self.checks))
        metrics.update(extra)
        self.epoch_metrics = metrics

    @property
    def problems(self) -> list[str]:
        """Every check not confirmed in the last epoch, as sentences."""
        return [c.problem or c.key for c in self.checks if not c.ok]

    @property
    def fatal_problems(self) -> list[str]:
        """The checks that contradicted the settings in the last epoch: the trial fails."""
        return [c.problem or c.key for c in self.checks if not c.ok and c.fatal]

    @property
    def fell_back_to_eager(self) -> bool:
        """A compiled trial whose compiled forward is not in use."""
        return self.settings.compile_mode is not None and any(
            c.key == "compiled_ok" and not c.ok for c in self.checks
        )

    def _run_checks(self, pl_module: L.LightningModule) -> tuple[list[Check], dict[str, float]]:
        settings = self.settings
        checks = [self._param_dtype(pl_module), self._autocast()]
        extra: dict[str, float] = {}
        matmul = (settings.matmul_precision or Float32MatmulPrecision.HIGHEST).value
        actual = torch.get_float32_matmul_precision()
        checks.append(
            Check(
                "matmul_precision_ok",
                actual == matmul,
                f"float32 matmul precision is {actual}, the trial's is {matmul}",
            )
        )
        if self._device_type == "cuda":
            want_tf32 = matmul != Float32MatmulPrecision.HIGHEST.value
            tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
            checks.append(
                Check(
                    "cuda_matmul_tf32_ok",
                    tf32 == want_tf32,
                    f"torch.backends.cuda.matmul.allow_tf32 is {tf32} under matmul "
                    f"precision {matmul}",
                )
            )
            extra["in_effect/cudnn_allow_tf32"] = float(bool(torch.backends.cudnn.allow_tf32))
        counts = read_compile_counts()
        checks.append(self._compiled(counts.graphs))
        mode = settings.compile_mode
        if mode is not None:
            extra.update(
                {
                    "compile/graphs": float(counts.graphs),
                    "compile/graph_breaks": float(counts.graph_breaks),
                    "compile/recompiles": float(counts.recompiles),
                    "compile/fell_back_to_eager": float(not checks[-1].ok),
                }
            )
        if mode is not None and mode.uses_cuda_graphs() and self._device_type == "cuda":
            recorded, skips = self.cuda_graphs.count, counts.cudagraph_skips
            checks.append(
                Check(
                    "cuda_graphs_ok",
                    recorded >= 1 and skips == 0,
                    f"compile mode {mode}: {recorded} CUDA graphs recorded, {skips} graphs run "
                    "without CUDA graphs (the compile log says why)",
                    fatal=False,  # the signal is not yet confirmed on a GPU
                )
            )
            extra["in_effect/cuda_graphs"] = float(recorded)
            extra["compile/cudagraph_skips"] = float(skips)
        return checks, extra

    def _param_dtype(self, pl_module: L.LightningModule) -> Check:
        want = expected_param_dtype(self.settings.precision)
        found = {p.dtype for p in pl_module.parameters() if p.is_floating_point()}
        wrong = sorted(_dtype_name(d) for d in found - {want})
        return Check(
            "param_dtype_ok",
            not wrong,
            f"parameters in {', '.join(wrong)} where precision {self.settings.precision} "
            f"trains in {_dtype_name(want)}",
        )

    def _autocast(self) -> Check:
        precision = self.settings.precision
        if self.observed_autocast is None:
            return Check(
                "autocast_ok",
                False,
                "autocast was not observed: no forward of the LightningModule or of a "
                "compile target ran inside a training batch",
                fatal=False,
            )
        enabled, dtype = self.observed_autocast
        if precision.is_mixed():
            want = precision.get_model_dtype()
            ok = enabled and dtype == want
            problem = (
                f"precision {precision}: the training forward ran "
                + (f"under autocast to {_dtype_name(dtype)}" if enabled else "without autocast")
                + f", not under autocast to {_dtype_name(want)}"
            )
        else:
            ok = not enabled
            problem = (
                f"precision {precision}: the training forward ran under autocast to "
                f"{_dtype_name(dtype)}"
            )
        return Check("autocast_ok", ok, problem)

    def _compiled(self, graphs: int) -> Check:
        mode = self.settings.compile_mode
        compiled = [is_compiled_forward(t) for t in self.targets]
        if mode is None:
            return Check(
                "compiled_ok",
                not any(compiled),
                "an eager trial's compile target has a compiled forward",
            )
        if not self.targets:
            problem = f"compile mode {mode}: the model has no compile target; it ran eagerly"
        elif not all(compiled):
            names = [type(t).__name__ for t, c in zip(self.targets, compiled, strict=True) if not c]
            problem = f"compile mode {mode}: the forward of {', '.join(names)} is not compiled"
        elif graphs < 1:
            problem = (
                f"compile mode {mode}: dynamo compiled no graph in this fit; the compiled "
                "forward fell back to eager"
            )
        else:
            return Check("compiled_ok", True)
        return Check("compiled_ok", False, problem)
