"""The race's screen: every setting timed from initial weights, the slower ones out.

``search.algorithm: race`` runs this phase between connecting and training. One Ray task
(the re-timing's resources: a trial's CPUs and whole GPUs, so on a cluster the screen
runs on one node and one device) builds every feasible setting from the task's initial
weights with the sweep's seed and trains them in paired, interleaved rounds
(:func:`versatil.training.retime.screen`). After each round the sequential sign test of
:mod:`~versatil.sweep.results.elimination` takes out the settings slower than the
reference beyond chance; the screen stops when every setting left is faster than the
reference beyond noise (after six rounds at least), or at ``search.race.rounds``.

Its document (``race/screen.json`` in the experiment directory, and on the parent run)
orders the training phase (:mod:`~versatil.sweep.engine.race_search`). A resumed race
reads it back and does not screen again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from versatil.stats import Estimate
from versatil.sweep.engine.prepared import Prepared
from versatil.sweep.engine.stops import get_or_cancel
from versatil.sweep.plan import Plan, TrialPlan
from versatil.sweep.results.elimination import (
    EliminationRule,
    screen_speedup,
    settled,
    tie_groups,
    to_drop,
)
from versatil.sweep.results.records import axes_of
from versatil.sweep.results.verdict import setting_of
from versatil.sweep.vocab.names import RACE_ARTIFACT

__all__ = [
    "make_race_searcher",
    "race_stages",
    "read_screen",
    "run_screen",
    "screen_contenders",
    "screen_line",
]

MIN_ROUNDS = 6
"""Rounds before the screen may stop early: a median's 95% interval needs six."""


def _label(setting: Sequence[str], show_matmul: bool) -> str:
    from versatil.training.spec import setting_label

    return setting_label(*setting, show_matmul=show_matmul)


def screen_contenders(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """One point per setting, the reference's first, all at the reference's first params.

    Every setting is screened with the same task params and seed (the first trial of
    the reference), so each starts from the same initial weights on the same batches.
    """
    points = [dict(p) for p in plan.points]  # the grid's, each configuration once per seed
    wanted = plan.reference.settings
    first = next(p for p in points if all(p.get(k) == v for k, v in wanted.items()))
    matmul = [v for v in plan.space.get("matmul_precision", ()) if v != "none"]
    show = bool(matmul)
    out, seen = [], set()
    for point in [first, *points]:
        settings = {k: point[k] for k in wanted}
        setting = setting_of(settings)
        if setting in seen:
            continue
        seen.add(setting)
        out.append((_label(setting, show), {**first, **settings}))
    return out


def _screen_task(
    contenders: list[tuple[str, dict[str, Any]]], plan: TrialPlan, options: dict[str, Any]
) -> dict[str, Any]:
    """Runs in a Ray worker: the feasible settings' rounds, as plain values."""
    from versatil.cli_common import quiet_libraries
    from versatil.training.retime import screen
    from versatil.training.spec import DeviceInfo

    quiet_libraries()
    configs = [(label, plan.train_config(point)) for label, point in contenders]
    device = DeviceInfo.detect(configs[0][1].accelerator)
    infeasible = {}
    feasible = []
    for label, config in configs:
        reason = config.settings.infeasibility_reason(device)
        if reason is None:
            feasible.append((label, config))
        else:
            infeasible[label] = reason
    rule = EliminationRule(options["alpha"], max(1, len(feasible) - 1))
    document: dict[str, Any] = {"infeasible": infeasible, "threshold": rule.threshold}
    if len(feasible) < 2 or feasible[0][0] != contenders[0][0]:
        return {**document, "labels": [label for label, _ in feasible]}
    reference = feasible[0][0]

    def after_round(rates: Mapping[str, Sequence[float]]) -> tuple[list[str], bool]:
        racing = [label for label, values in rates.items() if len(values) == max_rounds(rates)]
        out = to_drop(rates, reference, racing, rule)
        left = [label for label in racing if label not in out]
        return list(out), settled(rates, reference, left, MIN_ROUNDS)

    timed = screen(
        feasible,
        rounds=options["rounds"],
        round_s=options["round_s"],
        seed=plan.seed,
        after_round=after_round,
    )
    return {**document, **timed.as_dict()}


def max_rounds(rates: Mapping[str, Sequence[float]]) -> int:
    """The rounds the settings still racing ran so far."""
    return max((len(values) for values in rates.values()), default=0)


def _summarize(document: dict[str, Any], contenders: list[tuple[str, dict[str, Any]]]) -> None:
    """Adds each setting's screen speedup, its call, and the training order to the document."""
    rates = document.get("samples_per_sec", {})
    labels = document.get("labels", [])
    reference = labels[0] if labels else None
    document["settings"] = []
    for label, point in contenders:
        entry: dict[str, Any] = {"label": label, "setting": list(setting_of(point))}
        if label in document["infeasible"]:
            entry["call"] = "infeasible"
        elif reference is None or label not in rates:
            entry["call"] = "not screened"
        elif label == reference:
            entry["call"] = "reference"
        else:
            found = screen_speedup(rates[label], rates[reference])
            entry["speedup"] = None if found is None else [found.value, found.low, found.high]
            entry["paired_rounds"] = 0 if found is None else found.n
            dropped = document.get("dropped", {}).get(label)
            entry["call"] = "eliminated" if dropped is not None else "racing"
            entry["rounds"] = dropped or len(rates[label])
        document["settings"].append(entry)
    racing = [e["label"] for e in document["settings"] if e["call"] == "racing"]
    document["groups"] = tie_groups(rates, reference, racing) if reference else []


def run_screen(plan: Plan, prepared: Prepared, stream: TextIO) -> dict[str, Any]:
    """The race's screen: read back when resuming, else run as one Ray task and written.

    Ray must be connected. The document is written to ``race/screen.json`` in the
    experiment directory (pushed to object storage when the storage path is there).
    """
    found = read_screen(prepared.experiment_dir)
    if found is not None:
        print("race: the screen's rounds read back; not screened again", file=stream, flush=True)
        return found
    import ray

    contenders = screen_contenders(plan)
    section = plan.search.race
    if section is None:
        raise ValueError(f"sweep {plan.name!r} is not a race: it has no screen")
    print(
        f"race: screening {len(contenders)} settings from initial weights in paired, "
        f"interleaved rounds on one device (at most {section.rounds}; a setting slower than "
        f"{contenders[0][0]} beyond chance is out, family-wise error {section.alpha:g})",
        file=stream,
        flush=True,
    )
    task = ray.remote(**plan.resources.retime, max_retries=0)(_screen_task)
    options = {"alpha": section.alpha, "rounds": section.rounds, "round_s": section.round_s}
    try:
        document = get_or_cancel(task.remote(contenders, plan.trial, options))
    except (ray.exceptions.RayError, OSError, ValueError) as error:
        lines = str(error).strip().splitlines()
        reason = (lines[-1] if lines else type(error).__name__)[:300]
        print(f"race: the screen failed ({reason}); every setting trains, as a grid", file=stream)
        document = {"infeasible": {}, "failed": reason}
    document["points"] = {label: point for label, point in contenders}
    _summarize(document, contenders)
    path = prepared.experiment_dir / RACE_ARTIFACT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str))
    prepared.storage.push(prepared.name, *Path(RACE_ARTIFACT).parts)
    if "failed" not in document:
        print(screen_line(document), file=stream, flush=True)
    return document


def read_screen(experiment_dir: Path) -> dict[str, Any] | None:
    """The screen's document a race wrote in ``experiment_dir``, or ``None``."""
    path = experiment_dir / RACE_ARTIFACT
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def screen_line(document: Mapping[str, Any]) -> str:
    """The screen's outcome in one line: who is out, and the training order."""
    if "failed" in document:
        return f"race: not screened ({document['failed']}): every setting trains"
    if not document.get("samples_per_sec"):
        return "race: not screened (fewer than two feasible settings with the reference)"
    out = [e for e in document["settings"] if e["call"] == "eliminated"]
    rounds = max_rounds(document.get("samples_per_sec", {}))
    line = f"race: screened in {rounds} rounds ({document.get('wall_s', 0.0):.1f} s)"
    if out:
        line += "; out: " + ", ".join(f"{e['label']} (round {e['rounds']})" for e in out)
    order = " then ".join(" | ".join(group) for group in document["groups"])
    reference = next((e["label"] for e in document["settings"] if e["call"] == "reference"), "")
    return line + (f"; training order: {order}" if order else f"; only {reference} trains")


def race_stages(
    document: Mapping[str, Any], points: Sequence[dict[str, Any]]
) -> list[list[dict[str, Any]]]:
    """The race's stages of trials, from the screen's document and every trial's point.

    Without a screen (the reference infeasible, or one feasible setting) every trial is
    one stage: the race trains as the grid does.
    """
    by_label = {e["label"]: tuple(e["setting"]) for e in document.get("settings", [])}
    calls = {tuple(e["setting"]): e["call"] for e in document.get("settings", [])}
    groups = [[by_label[label] for label in group] for group in document.get("groups", [])]
    if "reference" not in calls.values():
        return [list(points)]

    def of(settings: Sequence[Any]) -> list[dict[str, Any]]:
        return [p for p in points if setting_of(p) in settings]

    first = {s for s, call in calls.items() if call in ("reference", "infeasible")}
    first |= set(groups[0]) if groups else set()
    stages = [of(sorted(first))]
    stages += [of(group) for group in groups[1:]]
    return [stage for stage in stages if stage]


def make_race_searcher(plan: Plan, document: Mapping[str, Any]) -> Any:
    """The training phase's searcher, its stages ordered by the screen."""
    from versatil.sweep.engine.race_search import RaceSearcher  # imports Ray

    points = [dict(p) for p in plan.points]
    speedups = {}
    for entry in document.get("settings", []):
        found = entry.get("speedup")
        if found is not None:
            speedups[tuple(entry["setting"])] = Estimate(*found, n=entry["paired_rounds"])
    objectives = plan.objectives
    return RaceSearcher(
        race_stages(document, points),
        speedups,
        setting_of(plan.reference.settings),
        objectives.metric,
        objectives.mode,
        objectives.tolerance,
        axes_of(plan.axis_names, points),
        list(plan.search.seeds),
    )
