"""The race's training phase on synthetic results: its stages, its stop, futility, resume.

The searcher is Tune's own interface (suggest, on_trial_complete, save, restore) fed the
results a trial reports; the screen's document is written as the screen writes it.
"""

import pytest

from versatil.stats import Estimate
from versatil.sweep.engine.race import race_stages
from versatil.sweep.engine.race_search import RaceSearcher
from versatil.sweep.results.verdict import setting_of

REF = ("32", "none", "highest")
FAST = ("32", "default", "highest")
FASTER = ("bf16-mixed", "default", "highest")
SLOW = ("bf16-mixed", "none", "highest")
OUT = ("bf16-true", "none", "highest")
NO_GPU = ("16-mixed", "none", "highest")
LABELS = {
    REF: "32 + eager",
    FAST: "32 + default",
    FASTER: "bf16-mixed + default",
    SLOW: "bf16-mixed + eager",
    OUT: "bf16-true + eager",
    NO_GPU: "16-mixed + eager",
}
SEEDS = [0, 1]


def _point(setting, seed):
    precision, compile_mode, _ = setting
    return {"precision": precision, "compile_mode": compile_mode, "lr": 0.01, "seed": seed}


def _document(groups):
    """A screen: FASTER and FAST faster, SLOW a tie, OUT eliminated, NO_GPU infeasible."""
    calls = {REF: "reference", OUT: "eliminated", NO_GPU: "infeasible"}
    speed = {FASTER: [1.4, 1.3, 1.5], FAST: [1.2, 1.1, 1.3], SLOW: [1.0, 0.9, 1.1]}
    settings = []
    for setting, label in LABELS.items():
        entry = {"label": label, "setting": list(setting), "call": calls.get(setting, "racing")}
        if setting in speed:
            entry.update(speedup=speed[setting], rounds=12)
        settings.append(entry)
    return {"settings": settings, "groups": [[LABELS[s] for s in g] for g in groups]}


def _searcher(groups=((FASTER,), (FAST,), (SLOW,))):
    points = [_point(s, seed) for seed in SEEDS for s in LABELS]
    document = _document(groups)
    speedups = {
        tuple(e["setting"]): Estimate(*e["speedup"], n=12)
        for e in document["settings"]
        if "speedup" in e
    }
    stages = race_stages(document, points)
    return RaceSearcher(
        stages,
        speedups,
        REF,
        "val_loss",
        "min",
        0.01,
        ["precision", "compile_mode", "lr", "seed"],
        SEEDS,
    )


def _result(loss, status="completed"):
    return {"val_loss": loss, "status": status, "epoch": 2}


def _drain(searcher, losses, statuses=None):
    """Suggests until the searcher waits or finishes, completing each trial at once.

    Returns the settings trained, in order.
    """
    trained, count = [], 0
    statuses = statuses or {}
    while True:
        point = searcher.suggest(f"t{count}")
        if point is None or point == RaceSearcher.FINISHED:
            return trained, point
        count += 1
        setting = setting_of(point)
        trained.append((setting, point["seed"]))
        status = statuses.get((setting, point["seed"]), "completed")
        searcher.on_trial_complete(f"t{count - 1}", _result(losses[setting], status))


def test_the_stages_put_the_reference_the_infeasible_and_the_fastest_group_first():
    points = [_point(s, seed) for seed in SEEDS for s in LABELS]
    stages = race_stages(_document([[FASTER], [FAST], [SLOW]]), points)
    assert [sorted({setting_of(p) for p in stage}) for stage in stages] == [
        sorted([REF, NO_GPU, FASTER]),
        [FAST],
        [SLOW],
    ]
    assert all(setting_of(p) != OUT for stage in stages for p in stage)  # eliminated


def test_the_race_stops_at_the_first_setting_faster_and_no_worse():
    searcher = _searcher()
    losses = {REF: 0.10, FASTER: 0.20, FAST: 0.1001, SLOW: 0.10, NO_GPU: float("nan")}
    trained, last = _drain(searcher, losses)
    settings = [s for s, _ in trained]
    # FASTER is worse (0.20 against 0.10): the next group, FAST, is the answer; SLOW never trains
    assert set(settings) == {REF, NO_GPU, FASTER, FAST}
    assert last == RaceSearcher.FINISHED
    assert searcher.answer == "32 + default"
    assert SLOW not in settings


def test_a_setting_whose_first_seed_diverges_is_out_after_that_seed():
    searcher = _searcher()
    losses = {REF: 0.10, FASTER: 0.10, FAST: 0.10, SLOW: 0.10, NO_GPU: float("nan")}
    trained, _ = _drain(searcher, losses, statuses={(FASTER, 0): "diverged"})
    assert (FASTER, 0) in trained
    assert (FASTER, 1) not in trained  # futility: its second seed never starts
    assert searcher.answer == "32 + default"


def test_a_later_seed_waits_for_its_settings_first_seed():
    searcher = _searcher()
    suggested = []
    while (point := searcher.suggest(f"t{len(suggested)}")) not in (None, RaceSearcher.FINISHED):
        suggested.append(point)
    # every first seed of the first stage is out, the second seeds wait for them
    firsts = {setting_of(p) for p in suggested if p["seed"] == 0}
    assert firsts == {REF, NO_GPU, FASTER}
    assert not any(p["seed"] == 1 for p in suggested)


def test_without_an_answer_every_group_trains(tmp_path):
    searcher = _searcher()
    losses = {REF: 0.10, FASTER: 0.5, FAST: 0.5, SLOW: 0.10, NO_GPU: float("nan")}
    trained, last = _drain(searcher, losses)
    assert {s for s, _ in trained} == {REF, NO_GPU, FASTER, FAST, SLOW}
    assert last == RaceSearcher.FINISHED and searcher.answer is None


def test_a_saved_race_resumes_where_it_stopped(tmp_path):
    searcher = _searcher()
    losses = {REF: 0.10, FASTER: 0.20, FAST: 0.1001, SLOW: 0.10, NO_GPU: float("nan")}
    first = searcher.suggest("a")
    searcher.on_trial_complete("a", _result(losses[setting_of(first)]))
    live = searcher.suggest("b")
    searcher.save(str(tmp_path / "state.pkl"))
    again = _searcher()
    again.restore(str(tmp_path / "state.pkl"))
    assert again.live == {"b": live} and len(again.rows) == 1
    again.on_trial_complete("b", _result(losses[setting_of(live)]))
    # the rest of the race runs on: the answer as without the interruption
    count = 0
    while (point := again.suggest(f"c{count}")) not in (None, RaceSearcher.FINISHED):
        again.on_trial_complete(f"c{count}", _result(losses[setting_of(point)]))
        count += 1
    assert again.answer == "32 + default"


@pytest.mark.parametrize("groups", [(), ((FASTER, FAST),)])
def test_a_screen_with_no_group_or_one_group_trains_in_one_stage(groups):
    points = [_point(s, seed) for seed in SEEDS for s in LABELS]
    stages = race_stages(_document(groups), points)
    assert len(stages) == 1


def test_futility_rules_out_the_configuration_whose_first_seed_diverged_not_the_setting():
    points = [{**_point(s, seed), "lr": lr} for lr in (0.01, 0.1) for seed in SEEDS for s in LABELS]
    document = _document([[FASTER], [FAST], [SLOW]])
    speedups = {
        tuple(e["setting"]): Estimate(*e["speedup"], n=12)
        for e in document["settings"]
        if "speedup" in e
    }
    axes = ["precision", "compile_mode", "lr", "seed"]
    searcher = RaceSearcher(
        race_stages(document, points), speedups, REF, "val_loss", "min", 0.01, axes, SEEDS
    )
    trained, count = [], 0
    while (point := searcher.suggest(f"t{count}")) not in (None, RaceSearcher.FINISHED):
        count += 1
        setting, lr, seed = setting_of(point), point["lr"], point["seed"]
        trained.append((setting, lr, seed))
        diverged = setting == FASTER and lr == 0.1 and seed == 0
        result = _result(0.10, "diverged" if diverged else "completed")
        searcher.on_trial_complete(f"t{count - 1}", result)
    assert (FASTER, 0.1, 0) in trained and (FASTER, 0.1, 1) not in trained
    # the same setting's other configuration trains both seeds, and is the answer
    assert (FASTER, 0.01, 0) in trained and (FASTER, 0.01, 1) in trained
    assert searcher.answer == "bf16-mixed + default"


def test_the_race_never_stops_on_an_answer_while_the_reference_has_not_finished():
    searcher = _searcher()
    losses = {REF: 0.10, FASTER: 0.10, FAST: 0.10, SLOW: 0.10, NO_GPU: float("nan")}
    statuses = {(REF, seed): "diverged" for seed in SEEDS}
    trained, last = _drain(searcher, losses, statuses=statuses)
    # every group trains: no setting is compared with a reference that never finished
    assert {s for s, _ in trained} == {REF, NO_GPU, FASTER, FAST, SLOW}
    assert last == RaceSearcher.FINISHED and searcher.answer is None
