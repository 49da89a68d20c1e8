"""The sweep's end re-times its candidates for real: a Ray task, Lightning fits, MLflow."""

import io
import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from versatil.cli_common import run_main
from versatil.sweep.cli.main import main
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.tracking import child_runs

# Two training steps an epoch: past the throughput monitor's 2 warm-up batches, a trial
# times 2 steps, never the 3 windows a throughput needs, however busy the machine. The
# trials cannot call fp64 slower (a setting they time slower, and no better, is off the
# Pareto set and not re-timed); the paired rounds must.
CONV = {
    "name": "tests.user_tasks.conv_classifier:build",
    "params": {
        "n_train": 128,
        "n_val": 128,
        "image_size": 16,
        "channels": 8,
        "blocks": 1,
        "batch_size": 64,
        "fp64_pause_s": 0.03,
    },
}


@pytest.mark.slow  # a sweep on the Ray cluster, then its re-timing, then the command's
def test_fp64_is_found_slower_in_paired_rounds_and_the_rounds_are_logged(
    ray_cluster, mlflow_server, sweep_config, capsys
):
    config = sweep_config(
        name="confirmed",
        task=CONV,
        objective={"metric": "val_acc", "mode": "max"},
        space={"precision": ["32", "64"]},
        confirm={"enabled": "on", "rounds": 4, "round_s": 0.2},
    )
    stream = io.StringIO()
    outcome = run_sweep(config, stream=stream, tracking_uri=mlflow_server)
    assert "confirm: re-timing 2 settings (32 + eager, 64 + eager) in 4 paired" in (
        stream.getvalue()
    )
    assert {r.status for r in outcome.rows} == {"completed"}

    # The parent holds the rounds: both candidates, 4 counted rounds each.
    client = MlflowClient(mlflow_server)
    parent = outcome.tracking.parent_run_id
    document = json.loads(
        Path(client.download_artifacts(parent, "confirm/rounds.json")).read_text()
    )
    assert [c["label"] for c in document["contenders"]] == ["32 + eager", "64 + eager"]
    (rounds,) = document["groups"]  # one group: both fit in confirm.max_candidates
    # Each counted round in its own seeded random order, recorded.
    assert len(rounds["orders"]) == 4
    assert all(sorted(o) == ["32 + eager", "64 + eager"] for o in rounds["orders"])
    assert all(len(v) == 4 and min(v) > 0 for v in rounds["samples_per_sec"].values())
    assert rounds["steps"] >= 3 and rounds["torch_threads"] == 1  # resources.cpu: 1
    history = client.get_metric_history(parent, "confirm/64_eager/samples_per_sec")
    assert [m.step for m in history] == [0, 1, 2, 3]
    assert [m.value for m in history] == rounds["samples_per_sec"]["64 + eager"]

    # Each candidate's run holds its own rounds, and the speedup they give.
    runs = {r.data.tags["versatil.trial_id"]: r for r in child_runs(client, outcome.tracking)}
    slow_trial = next(c["trial_id"] for c in document["contenders"] if c["precision"] == "64")
    slow = runs[slow_trial].data.metrics
    rates = rounds["samples_per_sec"]
    ratios = sorted(a / b for a, b in zip(rates["64 + eager"], rates["32 + eager"], strict=True))
    assert slow["confirm/speedup"] == pytest.approx((ratios[1] + ratios[2]) / 2)
    # fp64 on the CPU: clearly slower, beyond the rounds' noise.
    assert slow["confirm/speedup_ci_high"] < 1

    # The rounds decide the verdict, at the end and in the report read back from MLflow.
    verdict = outcome.judgement.verdict
    by = {s.label: s for s in verdict.settings}
    assert by["64 + eager"].speed_call == "slower" and by["64 + eager"].rounds == 4
    assert verdict.recommended_setting == "32 + eager"
    assert "No setting beats eager fp32 beyond noise (closest: 64 + eager" in verdict.text
    assert "4 paired rounds" in verdict.text
    from versatil.sweep.report.load import load_report

    report = load_report(mlflow_server, "confirmed")
    assert report.judgement.verdict.text == verdict.text
    assert client.get_run(parent).data.tags["versatil.verdict"] == verdict.text

    # The command re-times the same sweep again, from its storage path, and logs it.
    code = run_main(
        main, ["confirm", "confirmed", "--storage-path", config.storage_path, "--rounds", "3"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "confirm: re-timing 2 settings (32 + eager, 64 + eager) in 3 paired" in out
    again = json.loads(Path(client.download_artifacts(parent, "confirm/rounds.json")).read_text())
    assert all(len(v) == 3 for v in again["groups"][0]["samples_per_sec"].values())
    text = client.get_run(parent).data.tags["versatil.verdict"]
    assert "3 paired rounds" in text and f"\n{text}\n" in out


def test_confirm_of_an_unknown_sweep_says_where_it_looked(tmp_path, capsys):
    code = run_main(main, ["confirm", "nope", "--storage-path", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"confirm: no run of sweep 'nope' under {tmp_path}; run it first" in err
    code = run_main(main, ["confirm", "nope", "--rounds", "1"])
    assert code == 2 and "--rounds 1 is out of range; use 2 to 100" in capsys.readouterr().err
