"""The trials a sweep's space expands to, in the order they start; needs no Ray.

The plan (:func:`~versatil.sweep.config.planning.make_plan`) holds what these give: the
trials ``--dry-run`` lists, the grid's points, the drawn points of replicates and races,
and the configuration a random or Optuna sweep suggests first.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from versatil.sweep.config.axes import ENUM_AXES, NumericAxis
from versatil.sweep.config.reference import compares_settings, reference_settings
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.vocab.keys import SEED

__all__ = [
    "describe_axis",
    "expand_trials",
    "grid_points",
    "reference_point",
    "replicate_points",
]


def describe_axis(axis: Any) -> str:
    """A short text for a sampled axis in ``--dry-run`` output."""
    if isinstance(axis, NumericAxis):
        return f"{axis.kind}({', '.join(map(str, axis.args))})"
    return str(axis)


def _grid_axes(config: SweepConfig) -> dict[str, list[Any]]:
    """The axes a sweep grid-searches, with their values, in sweep-file order."""
    grid = config.search.crosses_settings
    axes: dict[str, list[Any]] = {}
    for name, axis in config.space.items():
        if name in ENUM_AXES and grid:
            axes[name] = list(axis)
        elif isinstance(axis, NumericAxis) and axis.kind == "grid":
            axes[name] = list(axis.args)
    return axes


def grid_points(config: SweepConfig) -> list[dict[str, Any]]:
    """A grid sweep's combinations in the order its trials start.

    The settings axes vary fastest and every other grid axis slowest (the first in the
    sweep file slowest of all): the first trials cover each setting, so each compiled graph,
    once, concurrently, and the trials that repeat a setting at another learning rate come
    after, when their graph is already compiled (see ``versatil.training.compile_cache``).
    Tune's own order would vary the alphabetically first axis fastest and run a setting's
    learning rates side by side, each compiling the same graph at once.
    """
    axes = _grid_axes(config)
    settings = [name for name in ENUM_AXES if name in axes]
    others = [name for name in axes if name not in ENUM_AXES]
    return _combinations(axes, [*others, *settings])


def expand_trials(config: SweepConfig, draw: bool = False) -> list[dict[str, Any]]:
    """The trials a sweep will run, for ``--dry-run``; needs no Ray.

    Grid sweeps expand to the exact cross product of their grid axes (enum axes and
    ``grid`` numeric axes), times ``num_samples``, in the order they start
    (:func:`grid_points`); sampled axes show their distribution unless ``draw`` (or with
    replicates, whose draws are made here).
    Random and Optuna sweeps show ``num_samples`` draws (seeded), the first of them the
    :func:`reference_point`; Optuna's own choices adapt to results, so its draws are
    indicative. With replicates, every trial is repeated once per seed, all the first
    seed's trials first.
    """
    grid = config.search.crosses_settings
    draw = draw or config.replicates > 1  # replicates: the draws made here are the trials
    rng = random.Random(config.search.seed)
    points = grid_points(config) if grid else _tune_order(_grid_axes(config))
    first = reference_point(config) or {}
    trials = []
    for sample in range(config.search.num_samples):
        for chosen in points:
            trial = {}
            for name, axis in config.space.items():
                if sample == 0 and name in first:
                    trial[name] = first[name]
                elif name in chosen:
                    trial[name] = chosen[name]
                elif name in ENUM_AXES:
                    trial[name] = rng.choice(axis)
                elif isinstance(axis, NumericAxis):
                    trial[name] = _draw(axis, rng) if draw or not grid else describe_axis(axis)
                else:
                    trial[name] = axis
            trials.append(trial)
    if config.replicates == 1:
        return trials
    return [{**trial, SEED: seed} for seed in config.replicate_seeds() for trial in trials]


def reference_point(config: SweepConfig) -> dict[str, Any] | None:
    """The configuration a random or Optuna sweep suggests first: the reference's.

    Its settings are the reference's (eager fp32, see
    :func:`~versatil.sweep.config.reference.reference_settings`), so every such sweep trains
    its baseline. Its sampled task params take the middle of their range (the geometric
    middle of a ``loguniform``, the lower middle integer of a ``randint``) and a
    ``choice`` its first value: a point fixed by the sweep file alone, the same whatever the
    search seed, the searcher or the seeds of the replicates, and a typical value rather
    than an extreme one. ``grid`` axes (random search) are left out: Tune crosses the point
    with each of their values, as it does every sample.

    ``None`` for a grid sweep (it trains every setting), and for a space of one setting
    (every trial is then the reference).
    """
    if config.search.crosses_settings or not compares_settings(config):
        return None
    point: dict[str, Any] = dict(reference_settings(config))
    for name, axis in config.space.items():
        if isinstance(axis, NumericAxis) and axis.kind != "grid":
            point[name] = _middle(axis)
    return point


def _middle(axis: NumericAxis) -> Any:
    """The value a sampled axis takes in the :func:`reference_point`."""
    kind, args = axis.kind, axis.args
    if kind == "choice":
        return args[0]
    if kind == "uniform":
        return (args[0] + args[1]) / 2
    if kind == "loguniform":
        return math.sqrt(args[0] * args[1])
    return (args[0] + args[1]) // 2  # randint, both bounds included


def replicate_points(config: SweepConfig) -> list[dict[str, Any]]:
    """Every trial of a grid or random sweep with replicates, drawn here, seeds slowest.

    Tune draws a sampled axis again for every grid point, so a seed given as a grid axis
    would not repeat a configuration; these points are whole configurations, each given
    once per seed (see :func:`expand_trials`).
    """
    return expand_trials(config, draw=True)


def _tune_order(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Grid axes of a sampled sweep in Tune's order: the alphabetically first fastest."""
    return _combinations(axes, sorted(axes, reverse=True))


def _combinations(axes: dict[str, list[Any]], names: list[str]) -> list[dict[str, Any]]:
    """Every combination of the ``names`` axes, the last name varying fastest.

    With no names, one empty combination: a sweep without grid axes runs its space once.
    """
    combos = itertools.product(*(axes[n] for n in names))
    return [dict(zip(names, combo, strict=True)) for combo in combos]


def _draw(axis: NumericAxis, rng: random.Random) -> Any:
    kind, args = axis.kind, axis.args
    if kind == "choice":
        return rng.choice(list(args))
    if kind == "uniform":
        return rng.uniform(*args)
    if kind == "loguniform":
        return math.exp(rng.uniform(math.log(args[0]), math.log(args[1])))
    return rng.randint(args[0], args[1])
