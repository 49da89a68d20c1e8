"""The plan's space -> a Ray Tune ``param_space``.

Settings axes enter the space as their *values* (plain strings): Tune's searchers cannot
store enum objects. The trial turns them back into members with ``TrialSettings``.
"""

from __future__ import annotations

from typing import Any

from versatil.sweep.plan import Plan, Sampled
from versatil.sweep.vocab.keys import SEED
from versatil.training.spec import SETTING_ENUMS

__all__ = ["build_param_space", "numeric_domain"]


def numeric_domain(axis: Sampled) -> Any:
    """The Ray Tune domain of a sampled axis (also PBT's mutation ranges)."""
    from ray import tune

    kind, args = axis.kind, axis.args
    if kind == "grid":
        return tune.grid_search(list(args))
    if kind == "choice":
        return tune.choice(list(args))
    if kind == "uniform":
        return tune.uniform(*args)
    if kind == "loguniform":
        return tune.loguniform(*args)
    return tune.randint(args[0], args[1] + 1)  # sweep files give randint bounds inclusive


def build_param_space(plan: Plan) -> dict[str, Any]:
    """The Tune ``param_space`` of a sweep: one entry per axis, settings as strings.

    With ``search.algorithm: grid`` the settings axes are grid-searched (the full cross
    product); otherwise they are sampled with ``tune.choice``.
    """
    from ray import tune

    space: dict[str, Any] = {}
    for name, axis in plan.space.items():
        if name in SETTING_ENUMS:
            grid = plan.search.crosses_settings
            values = list(axis)
            space[name] = tune.grid_search(values) if grid else tune.choice(values)
        elif isinstance(axis, Sampled):
            space[name] = numeric_domain(axis)
        else:
            space[name] = axis
    if plan.search.replicates > 1 and plan.search.algorithm != "optuna":
        # Every trial is a point holding its seed (the plan's points); Tune wants the key here.
        space[SEED] = tune.choice(list(plan.search.seeds))
    return space
