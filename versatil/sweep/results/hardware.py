"""What each setting got out of its device, and the devices' ceilings, from the trials.

Every trial reports ``flops_per_sample``, its achieved ``tflops``, ``ceiling_fraction``
(over the measured ceiling of its compute dtype), ``mfu`` on GPUs with a published peak,
and ``joules_per_sample`` where an energy counter is readable
(:mod:`versatil.training.hardware`). A setting's value is the median over its finished
trials; a metric none of them reported is absent, never filled in.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from versatil.sweep.results.answer import SETTING_HARDWARE
from versatil.sweep.vocab.report import TrialReport
from versatil.training.hardware.dtypes import COMPUTE_DTYPES

__all__ = [
    "CEILINGS_ARTIFACT",
    "ceiling_metrics",
    "ceiling_text",
    "ceilings_of",
    "setting_hardware",
]

CEILINGS_ARTIFACT = "hardware/ceilings.json"
"""The parent run's document of every device's measured ceilings."""


def setting_hardware(rows: Iterable[Any]) -> dict[str, float]:
    """The median of each hardware metric over ``rows`` (trials) that reported it."""
    out: dict[str, float] = {}
    rows = list(rows)
    for name in SETTING_HARDWARE:
        values = [float(r.metrics[name]) for r in rows if _number(r.metrics.get(name))]
        if values:
            out[name] = statistics.median(values)
    return out


def ceilings_of(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """The distinct device ceilings the trials divided by, in the order first seen."""
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        ceiling = TrialReport.from_dict(row.metrics).hardware_ceiling
        if isinstance(ceiling, dict) and isinstance(ceiling.get("key"), dict):
            ident = repr(sorted(ceiling["key"].items()))
            known = seen.setdefault(ident, {"key": ceiling["key"]})
            for part in ("tflops", "sizes", "measured_at"):  # trials may know other dtypes
                known.setdefault(part, {}).update(ceiling.get(part, {}))
    for known in seen.values():  # the tables' order, whichever trial measured first
        for part in ("tflops", "sizes", "measured_at"):
            known[part] = _in_table_order(known[part])
    return list(seen.values())


def _in_table_order(by_dtype: dict[str, Any]) -> dict[str, Any]:
    """``by_dtype`` with its compute dtypes in :data:`COMPUTE_DTYPES` order, others last."""

    def rank(dtype: str) -> tuple[int, str]:
        known = dtype in COMPUTE_DTYPES
        return (COMPUTE_DTYPES.index(dtype) if known else len(COMPUTE_DTYPES), dtype)

    return dict(sorted(by_dtype.items(), key=lambda item: rank(item[0])))


def ceiling_metrics(ceilings: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """The parent run's ceiling metrics, one value each.

    ``ceiling_tflops/<dtype>`` for one device; ``ceiling_tflops/<device>/<dtype>`` when
    the trials ran on several.
    """
    out: dict[str, list[float]] = {}
    for ceiling in ceilings:
        device = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(ceiling["key"].get("device", "device")))
        prefix = "ceiling_tflops/" + (f"{device}/" if len(ceilings) > 1 else "")
        for dtype, tflops in ceiling.get("tflops", {}).items():
            out[f"{prefix}{dtype}"] = [float(tflops)]
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def ceiling_text(ceilings: Sequence[dict[str, Any]]) -> str:
    """One line per device: its measured matmul ceiling per compute dtype."""
    lines = []
    for ceiling in ceilings:
        # A document an earlier version logged may hold them in another order.
        tflops = _in_table_order(ceiling.get("tflops", {}))
        values = ", ".join(f"{d} {t:.3g}" for d, t in tflops.items())
        lines.append(f"ceiling of {ceiling['key'].get('device')} (TFLOP/s, measured): {values}")
    return "\n".join(lines)
