"""What compiling cost a setting, when it pays off, and how its compiled graphs fared.

Pure functions on a setting's trials (:class:`~versatil.sweep.results.rows.TrialRow`).
A compiled trial reports its ``compile_time_s`` (the seconds its compiling batches took
beyond a typical step, recompiles included) and dynamo's counts over its fit:
``compile/graphs``, ``compile/graph_breaks`` and ``compile/recompiles``
(:mod:`versatil.training.compile_health`). A compiled setting's
:class:`CompileCost` holds the median of each over its trials; its compile time is
taken from the trials that compiled their graphs themselves where there are any (a trial
that loaded them from the sweep's compile cache reports the time to load them).

**Break-even.** Compiling costs ``C`` seconds once; a setting ``S`` times as fast as the
reference then saves ``1 - 1/S`` of each second of training at the reference's speed, so
it is ahead after ``C / (1 - 1/S)`` seconds of such training. It is given only when the
speedup is above 1 beyond noise (the low end of its interval above 1): a speedup that
may be 1 may never pay off.

**A compiled setting found slower** names what most often slows compiled code down: its
recompiles (each compiles again and adds a guard to check) and graph breaks (each runs
Python between graphs).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from typing import Protocol

from versatil.stats import Estimate
from versatil.sweep.results.rows import TrialRow, value_of
from versatil.training.metric_names import COMPILE_TIME_S

__all__ = [
    "CACHE_LOADED",
    "COMPILE_KEYS",
    "GRAPHS",
    "GRAPH_BREAKS",
    "RECOMPILES",
    "CompileCost",
    "break_even",
    "compile_cell",
    "compile_cost",
    "compile_fields",
    "compile_note",
    "compile_notes",
    "duration_text",
]

GRAPHS = "compile/graphs"
"""A compiled trial's FX graphs compiled in its fit."""

GRAPH_BREAKS = "compile/graph_breaks"
"""A compiled trial's graph breaks in its fit."""

RECOMPILES = "compile/recompiles"
"""A compiled trial's frames compiled again after a guard failed."""

CACHE_LOADED = "compile/cache_loaded"
"""1 when a compiled trial loaded its graphs from the sweep's compile cache."""

COMPILE_KEYS = (
    "compile_s",
    "compile_graphs",
    "compile_graph_breaks",
    "compile_recompiles",
    "break_even_s",
)
"""The keys a setting of the JSON answer carries about compiling (``None`` when eager)."""


@dataclasses.dataclass(frozen=True)
class CompileCost:
    """A compiled setting's compile time, graphs and when compiling pays off.

    Attributes:
        compile_s: The median ``compile_time_s`` of its trials (of those that compiled
            their graphs themselves, where any did); ``None`` where none reported one.
        graphs: The median count of FX graphs compiled in a trial's fit.
        graph_breaks: The median count of graph breaks.
        recompiles: The median count of frames compiled again after a guard failed.
        break_even_s: Seconds of training (at the reference's speed) after which the
            speedup has paid the compile time back; ``None`` unless the speedup is above
            1 beyond noise.
    """

    compile_s: float | None
    graphs: float | None
    graph_breaks: float | None
    recompiles: float | None
    break_even_s: float | None = None


class _Compared(Protocol):
    """What :func:`compile_note` reads of a setting's result."""

    @property
    def label(self) -> str: ...

    @property
    def speed_call(self) -> str: ...

    @property
    def compile(self) -> CompileCost | None: ...


def break_even(compile_s: float | None, speedup: Estimate | None) -> float | None:
    """``compile_s / (1 - 1/speedup)``, when the speedup's interval lies above 1."""
    if compile_s is None or speedup is None or not speedup.bounded or speedup.low <= 1:
        return None
    return compile_s / (1 - 1 / speedup.value)


def _median(rows: Iterable[TrialRow], name: str) -> float | None:
    values = [v for v in (value_of(r, name) for r in rows) if v is not None]
    return statistics.median(values) if values else None


def compile_cost(rows: Sequence[TrialRow], speedup: Estimate | None) -> CompileCost | None:
    """A setting's compile cost from its trials, and its break-even at ``speedup``.

    Args:
        rows: The setting's finished trials.
        speedup: Its final speedup over the reference (re-timed where it was).

    Returns:
        ``None`` when no trial reported a compile time or a graph count (an eager
        setting).
    """
    compiled_here = [r for r in rows if not value_of(r, CACHE_LOADED)]
    timed = compiled_here if _median(compiled_here, COMPILE_TIME_S) is not None else rows
    compile_s = _median(timed, COMPILE_TIME_S)
    graphs = _median(rows, GRAPHS)
    if compile_s is None and graphs is None:
        return None
    return CompileCost(
        compile_s=compile_s,
        graphs=graphs,
        graph_breaks=_median(rows, GRAPH_BREAKS),
        recompiles=_median(rows, RECOMPILES),
        break_even_s=break_even(compile_s, speedup),
    )


def compile_fields(cost: CompileCost | None) -> dict[str, float | None]:
    """The :data:`COMPILE_KEYS` of a setting's JSON answer (every one ``None`` when eager)."""
    if cost is None:
        return dict.fromkeys(COMPILE_KEYS)
    values = (cost.compile_s, cost.graphs, cost.graph_breaks, cost.recompiles)
    return dict(zip(COMPILE_KEYS, (*values, cost.break_even_s), strict=True))


def duration_text(seconds: float) -> str:
    """``0.35 s``, ``10.2 s``, ``59 s``, ``2.5 min``, ``3.1 h``."""
    if seconds < 100:
        return f"{seconds:.3g} s"
    if seconds < 6000:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def _count(value: float | None, noun: str, plural: str = "") -> str:
    """``4 recompiles``, ``1 graph``, ``2.5 graph breaks``; ``? graphs`` when unknown."""
    plural = plural or f"{noun}s"
    if value is None:
        return f"? {plural}"
    return f"{value:g} {noun if value == 1 else plural}"


def compile_cell(cost: CompileCost | None, seconds: bool = True) -> str:
    """A table's cell: ``5 graphs, 2 breaks, 4 recompiles, 10.2 s``; ``-`` when eager.

    Args:
        cost: A setting's (or one trial's) compile cost.
        seconds: Show the compile time (a table with a compile time column does not).
    """
    if cost is None:
        return "-"
    parts = [
        _count(cost.graphs, "graph"),
        _count(cost.graph_breaks, "break"),
        _count(cost.recompiles, "recompile"),
    ]
    if seconds and cost.compile_s is not None:
        parts.append(duration_text(cost.compile_s))
    return ", ".join(parts)


def _causes(cost: CompileCost) -> str:
    """The likely causes of a slow compiled setting, recompiles first."""
    causes = [
        _count(value, noun)
        for value, noun in ((cost.recompiles, "recompile"), (cost.graph_breaks, "graph break"))
        if value
    ]
    if causes:
        return ", ".join(causes)
    return f"no recompile or graph break ({_count(cost.graphs, 'graph')})"


def compile_note(result: _Compared) -> str:
    """What compiling cost a setting and what it gained, in words; ``""`` when eager.

    ``compiles in 10.2 s, pays off after 59 s of training`` for a setting faster beyond
    noise; ``slower: 4 recompiles, 2 graph breaks`` for one found slower; otherwise its
    compile time and why it has no break-even.
    """
    cost = result.compile
    if cost is None:
        return ""
    if result.speed_call == "slower":
        return f"slower: {_causes(cost)}"
    spent = "" if cost.compile_s is None else f"compiles in {duration_text(cost.compile_s)}"
    if cost.break_even_s is not None:
        gain = f"pays off after {duration_text(cost.break_even_s)} of training"
    elif result.speed_call == "tie":
        gain = "no speedup beyond noise to pay it off"
    elif result.speed_call in ("unmeasured", "shared"):
        gain = "speed not measured, so no break-even"
    else:
        gain = ""
    return ", ".join(part for part in (spent, gain) if part)


def compile_notes(results: Iterable[_Compared]) -> list[str]:
    """One line per compiled setting with something to say: ``label: note``."""
    notes = [(r.label, compile_note(r)) for r in results]
    return [f"{label}: {note}" for label, note in notes if note]
