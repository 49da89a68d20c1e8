"""Sweeps of how a Lightning model is trained, run by Ray Tune and tracked in MLflow.

The public surface, imported on first use so that ``import versatil.sweep`` stays light
(``--help`` and ``--dry-run`` import no torch, Ray or MLflow)::

    from versatil.sweep import load_sweep, run_sweep

    outcome = run_sweep(load_sweep("sweeps/quickstart.yaml"))
    print(outcome.judgement.verdict.text)

The subpackages, by job: ``config`` (the sweep file), ``engine`` (the driver), ``worker``
(what runs inside a trial), ``tracking`` (MLflow), ``results`` (rows, ranking, verdict),
``report`` (a sweep read back from MLflow), ``int8`` (compressing winners) and ``cli``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from versatil.sweep.config.load import load_sweep, validate_sweep
    from versatil.sweep.config.schema import SweepConfig
    from versatil.sweep.engine.runner import SweepOutcome, run_sweep
    from versatil.sweep.int8.compress import compress_sweep
    from versatil.sweep.report.load import SweepReport, load_report
    from versatil.sweep.report.render import render
    from versatil.sweep.results.judgement import Judgement, judge
    from versatil.sweep.results.rows import TrialRow

__all__ = [
    "Judgement",
    "SweepConfig",
    "SweepOutcome",
    "SweepReport",
    "TrialRow",
    "compress_sweep",
    "judge",
    "load_report",
    "load_sweep",
    "render",
    "run_sweep",
    "validate_sweep",
]

_HOMES = {
    "load_sweep": "versatil.sweep.config.load",
    "validate_sweep": "versatil.sweep.config.load",
    "SweepConfig": "versatil.sweep.config.schema",
    "SweepOutcome": "versatil.sweep.engine.runner",
    "run_sweep": "versatil.sweep.engine.runner",
    "compress_sweep": "versatil.sweep.int8.compress",
    "SweepReport": "versatil.sweep.report.load",
    "load_report": "versatil.sweep.report.load",
    "render": "versatil.sweep.report.render",
    "Judgement": "versatil.sweep.results.judgement",
    "judge": "versatil.sweep.results.judgement",
    "TrialRow": "versatil.sweep.results.rows",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'versatil.sweep' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted(__all__)
