"""``--dry-run``: the trials a sweep expands to and which cannot run here, starting nothing."""

from __future__ import annotations

from versatil.sweep.config.axes import ENUM_AXES
from versatil.sweep.config.checks import check_task
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.config.trial import train_config_for
from versatil.sweep.engine.space import expand_trials
from versatil.tables import format_table

__all__ = ["print_dry_run", "trial_feasibility"]


def trial_feasibility(config: SweepConfig) -> list[tuple[dict, str | None]]:
    """Each expanded trial with the reason it is infeasible on this machine (or ``None``)."""
    from versatil.training.spec import DeviceInfo

    device = DeviceInfo.detect(config.trainer.accelerator)
    out = []
    for axes in expand_trials(config):
        # Only the enum axes decide feasibility; sampled numeric axes show as text here.
        settings = {name: value for name, value in axes.items() if name in ENUM_AXES}
        reason = train_config_for(settings, config).settings.infeasibility_reason(device)
        out.append((axes, reason))
    return out


def print_dry_run(config: SweepConfig) -> None:
    """Prints the trial list and the count of feasible ones.

    Raises:
        ConfigError: when the task's params model rejects a param (see :func:`check_task`).
    """
    check_task(config)
    trials = trial_feasibility(config)
    names = config.axis_names
    rows = [
        [i, *(axes.get(n) for n in names), "yes" if reason is None else f"no: {reason}"]
        for i, (axes, reason) in enumerate(trials)
    ]
    print(format_table(["#", *names, "feasible here"], rows))
    feasible = sum(reason is None for _, reason in trials)
    objectives = ", ".join(f"{m} ({mode})" for m, mode in config.objective.objectives)
    kind = "objectives, ranked as a Pareto set" if config.objective.is_multi else "objective"
    print(f"\n{kind}: {objectives}")
    if config.scheduler.type != "fifo":
        metric, mode = config.scheduler_objective
        print(f"scheduler {config.scheduler.type} compares trials on {metric} ({mode})")
    if config.search.algorithm == "race":
        print(
            "race: the settings are screened first; these are the most trials it trains, "
            "fewer when the screen rules settings out or a faster one is the answer"
        )
    print(
        f"\nsweep {config.name!r}: {len(trials)} trials ({config.search.algorithm} search, "
        f"{config.scheduler.type} scheduler), {feasible} feasible on this machine; nothing started"
    )
