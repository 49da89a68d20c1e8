"""Seeds as replicates, end to end: real Ray Tune trials, a real ``mlflow server``."""

import io
import statistics
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from versatil.stats import paired_difference_ci
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.tracking import child_runs

pytestmark = pytest.mark.slow  # a sweep on the Ray cluster


def test_replicates_seed_group_and_summarise(ray_cluster, mlflow_server, sweep_config):
    config = sweep_config(
        name="replicated",
        space={"precision": ["32", "bf16-mixed"], "lr": 0.01},
        replicates=2,
        trainer={"max_epochs": 2, "accelerator": "cpu", "seed": 3},
    )
    outcome = run_sweep(config, stream=io.StringIO(), tracking_uri=mlflow_server)
    assert len(outcome.rows) == 4 and {r.status for r in outcome.rows} == {"completed"}

    client = MlflowClient(mlflow_server)
    children = child_runs(client, outcome.tracking)
    assert len(children) == 4
    groups = {}
    for run in children:
        seed = run.data.params["seed"]
        assert run.info.run_name.endswith(f"/seed={seed}")
        groups.setdefault(run.data.tags["versatil.configuration"], []).append(run)
    assert set(groups) == {"32/lr=0.01", "bf16-mixed/lr=0.01"}
    for runs in groups.values():
        assert sorted(r.data.params["seed"] for r in runs) == ["3", "4"]
        losses = [r.data.metrics["val_loss"] for r in runs]
        assert losses[0] != losses[1], "the seed did not reach the fit"
        tags = {r.data.tags["versatil.objective_over_seeds"] for r in runs}
        (text,) = tags
        mean, _, rest = text.partition(" ± ")
        assert float(mean) == pytest.approx(statistics.fmean(losses), rel=1e-5)
        assert rest.endswith("(2 seeds)")

    # The summary on the parent run: each configuration over its seeds, and the settings'
    # objectives with their intervals over seeds.
    path = client.download_artifacts(outcome.tracking.parent_run_id, "summary.txt")
    out = Path(path).read_text()
    assert "configuration" in out and "val_loss (mean ± 95% CI)" in out
    for name in groups:
        line = next(x for x in out.splitlines() if x.startswith(name + " "))
        assert line.split()[1] == "2"
    settings = {s.label: s for s in outcome.judgement.verdict.settings}
    assert settings["bf16-mixed + eager"].seeds == 2
    assert settings["bf16-mixed + eager"].change.bounded
    verdict_line = next(x for x in out.splitlines() if x.startswith("bf16-mixed + eager "))
    assert " ± " in verdict_line

    # Time to target: eager fp32's mean final val_loss; its better seed reached it.
    target = float(client.get_run(outcome.tracking.parent_run_id).data.tags["versatil.target"])
    assert target == pytest.approx(statistics.fmean(
        r.data.metrics["val_loss"] for r in groups["32/lr=0.01"]
    ))  # fmt: skip
    for run in children:
        seconds = run.data.metrics.get("time_to_target_s")
        final = run.data.metrics["val_loss"]
        if final <= target * 1.01:  # it ended within the tolerance: it reached the target
            epochs = client.get_metric_history(run.info.run_id, "epoch_time_s")
            assert seconds is not None and 0 < seconds <= sum(m.value for m in epochs) + 1e-9
    assert any("time_to_target_s" in r.data.metrics for r in groups["32/lr=0.01"])


def test_seeds_pair_across_settings_and_equal_objectives_give_a_zero_interval(
    ray_cluster, sweep_config
):
    """Replicate k of every setting trains with seed k: the change is over per-seed pairs.

    matmul precision ``high`` leaves a CPU's float32 matmuls as they are, so on a CPU
    where it does, each seed's two trials reach the same val_loss and the change is
    exactly 0 ± 0; wherever it does not, the interval is still the paired one.
    """
    config = sweep_config(
        name="paired-seeds",
        space={"matmul_precision": ["highest", "high"], "lr": 0.01},
        replicates=2,
        trainer={"max_epochs": 1, "accelerator": "cpu", "seed": 5},
    )
    outcome = run_sweep(config, stream=io.StringIO())
    assert {r.status for r in outcome.rows} == {"completed"}
    by_seed = {}
    for row in outcome.rows:
        by_seed.setdefault(row.axes["seed"], {})[row.axes["matmul_precision"]] = row.objective
    assert sorted(by_seed) == [5, 6]
    differences = [s["high"] - s["highest"] for s in by_seed.values()]
    reference = statistics.fmean(s["highest"] for s in by_seed.values())
    (high,) = [s for s in outcome.judgement.verdict.settings if s.setting[2] == "high"]
    assert high.paired and high.seeds == 2
    expected = paired_difference_ci(
        [s["high"] for s in by_seed.values()], [s["highest"] for s in by_seed.values()]
    )
    assert high.change.value == pytest.approx(expected.value / abs(reference), abs=1e-12)
    assert high.change.low == pytest.approx(expected.low / abs(reference), abs=1e-12)
    if all(d == 0 for d in differences):
        assert (high.change.low, high.change.value, high.change.high) == (0.0, 0.0, 0.0)
        assert high.objective_call == "no worse"
