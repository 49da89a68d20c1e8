"""``--dry-run``: the plan a sweep makes, its trials and which cannot run here, starting nothing."""

from __future__ import annotations

from versatil.sweep.config.checks import check_task
from versatil.sweep.config.planning import make_plan
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.plan import Plan
from versatil.tables import format_table
from versatil.training.spec import SETTING_ENUMS

__all__ = ["print_dry_run", "trial_feasibility"]


def trial_feasibility(plan: Plan) -> list[tuple[dict, str | None]]:
    """Each of the plan's trials with the reason it is infeasible on this machine (or ``None``)."""
    from versatil.training.spec import DeviceInfo

    device = DeviceInfo.detect(plan.resources.accelerator)
    out = []
    for axes in plan.trials:
        # Only the settings axes decide feasibility; sampled numeric axes show as text here.
        settings = {name: value for name, value in axes.items() if name in SETTING_ENUMS}
        reason = plan.trial.train_config(settings).settings.infeasibility_reason(device)
        out.append((dict(axes), reason))
    return out


def print_dry_run(config: SweepConfig) -> None:
    """Prints the sweep's plan, its trial list and the count of feasible ones.

    Raises:
        ConfigError: when the task's params model rejects a param (see :func:`check_task`).
    """
    check_task(config)
    plan = make_plan(config)
    trials = trial_feasibility(plan)
    names = plan.axis_names
    rows = [
        [i, *(axes.get(n) for n in names), "yes" if reason is None else f"no: {reason}"]
        for i, (axes, reason) in enumerate(trials)
    ]
    print(format_table(["#", *names, "feasible here"], rows))
    feasible = sum(reason is None for _, reason in trials)
    objectives = ", ".join(f"{m} ({mode})" for m, mode in plan.objectives.objectives)
    kind = "objectives, ranked as a Pareto set" if plan.objectives.is_multi else "objective"
    print(f"\n{kind}: {objectives}")
    scheduler = plan.scheduler
    if scheduler.type != "fifo":
        print(
            f"scheduler {scheduler.type} compares trials on {scheduler.metric} ({scheduler.mode})"
        )
    if plan.search.algorithm == "race":
        print(
            "race: the settings are screened first; these are the most trials it trains, "
            "fewer when the screen rules settings out or a faster one is the answer"
        )
    print("\nplan (logged as plan.json on the sweep's parent run):")
    for line in plan.lines():
        print(f"  {line}")
    print(
        f"\nsweep {plan.name!r}: {len(trials)} trials ({plan.search.algorithm} search, "
        f"{scheduler.type} scheduler), {feasible} feasible on this machine; nothing started"
    )
