"""``search.algorithm: race``: a real screen on the Ray cluster, then training fastest first.

A user-style conv net with BatchNorm (tuple batches, its own ``val_acc``): fp64
convolutions are several times slower than fp32 on a CPU, so the screen must take fp64
out; what trains, what does not and why, and the cost are in the answer.
"""

import io
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.sweep.drivers import cli, finished_trials, gated_sweep, run, wait_cpus_freed, wait_for
from versatil.cli_common import run_main
from versatil.errors import ConfigError
from versatil.sweep.cli.main import main
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.results.race import NOT_TRAINED_ANSWER
from versatil.sweep.results.verdict import setting_of
from versatil.sweep.vocab.names import RACE_ARTIFACT

CONV = {
    "name": "tests.user_tasks.conv_classifier:build",
    "params": {
        "n_train": 256,
        "n_val": 64,
        "image_size": 32,
        "channels": 32,
        "blocks": 1,
        "batch_size": 32,
        "fp64_pause_s": 0.03,
    },
}
# val_acc at 100% tolerance: every setting is no worse, so speed alone decides.
OBJECTIVE = {"metric": "val_acc", "mode": "max", "tolerance": 1.0}


@pytest.mark.slow  # a screen and a race's trials on the Ray cluster
def test_a_race_screens_trains_fastest_first_and_says_what_it_did_not_train(
    ray_cluster, mlflow_server, sweep_config, capsys, tmp_path
):
    config = sweep_config(
        name="race",
        task=CONV,
        objective=OBJECTIVE,
        space={"precision": ["32", "64", "bf16-true"]},
        replicates=2,
        search={"algorithm": "race", "race": {"rounds": 12, "round_s": 0.2}},
        confirm={"enabled": "auto", "rounds": 6, "round_s": 0.2},
    )
    stream = io.StringIO()
    outcome = run_sweep(config, stream=stream, tracking_uri=mlflow_server)
    out = stream.getvalue()
    assert "race: screening 3 settings from initial weights" in out
    race = outcome.race
    by_label = {s["label"]: s for s in race["settings"]}

    # fp64 is out in the screen, by the sequential rule (7 straight losses for 2 settings).
    fp64 = by_label["64 + eager"]
    assert fp64["call"] == "eliminated" and not fp64["trained"], fp64
    assert (
        fp64["not_trained"] == f"out in the screen: slower than 32 + eager (round {fp64['rounds']})"
    )
    assert 7 <= fp64["rounds"] <= 12
    assert all(setting_of(r.axes)[0] != "64" for r in outcome.rows)

    # The reference trained with both seeds; every other setting trained, or says why not.
    reference = [r for r in outcome.rows if setting_of(r.axes) == ("32", "none", "highest")]
    assert sorted(r.axes["seed"] for r in reference) == [0, 1]
    for entry in race["settings"]:
        if entry["call"] == "racing":
            assert entry["trained"] or entry["not_trained"] == NOT_TRAINED_ANSWER
    trained = {setting_of(r.axes) for r in outcome.rows}
    assert trained <= {("32", "none", "highest"), ("bf16-true", "none", "highest")}
    # A trained setting trained the reference's seeds: its objective is paired by seed.
    verdict = outcome.judgement.verdict
    for s in verdict.settings:
        assert s.seeds == 2 and (s.change is None or s.paired), s

    # The cost: device-seconds by phase, and the trials the race did not train.
    compute = outcome.compute
    spent = compute["device_s"]
    assert spent["screen"] > 0 and spent["training"] > 0
    assert spent["total"] == pytest.approx(spent["screen"] + spent["training"] + spent["retiming"])
    assert compute["trials_planned"] == 6
    assert compute["trials_run"] == len(outcome.rows) <= 4
    assert compute["trials_not_trained"] == 6 - len(outcome.rows)

    # The answer, read back from MLflow: the race and the compute beside the verdict.
    capsys.readouterr()
    args = ["report", "race", "--format", "json", "--tracking-uri", mlflow_server]
    assert run_main(main, [*args, "--output", str(tmp_path / "report")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["race"]["settings"] == race["settings"]
    assert report["compute"] == compute
    assert report["verdict"]["recommended"] in {
        s["label"] for s in race["settings"] if s["trained"]
    }
    table = _table(mlflow_server, capsys, tmp_path)
    assert "race: 64 + eager: out in the screen: slower than 32 + eager (round " in table
    assert "compute: " in table and "device-s (screen " in table
    # The screen's document is in the experiment directory, where a resume reads it.
    saved = json.loads((outcome.experiment_dir / RACE_ARTIFACT).read_text())
    assert saved["dropped"] == {"64 + eager": fp64["rounds"]}


def _table(mlflow_server, capsys, tmp_path):
    args = ["report", "race", "--tracking-uri", mlflow_server, "--output", str(tmp_path / "t")]
    assert run_main(main, args) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"space": {"lr": {"grid": [0.1, 0.2]}}}, "the space holds one setting"),
        (
            {"objective": {"metrics": {"val_loss": "min", "samples_per_sec": "max"}}},
            "use one objective",
        ),
        ({"scheduler": {"type": "pbt"}}, "use scheduler fifo or asha"),
    ],
)
def test_a_race_it_cannot_run_is_refused_at_load_naming_the_field(sweep_config, fields, expected):
    data = {"space": {"precision": ["32", "bf16-mixed"]}, **fields}
    with pytest.raises(ConfigError) as error:
        sweep_config(search={"algorithm": "race"}, **data)
    assert "search.algorithm: 'race'" in str(error.value)
    assert expected in str(error.value)


def _committed(experiment_dir, finished, gated):
    """Whether Tune's experiment state (the race's searcher saved with it) holds the trials.

    The finished ones as terminated, and the gated one.
    """
    states = sorted(experiment_dir.glob("experiment_state-*.json"))
    if not states:
        return False
    try:
        data = json.loads(states[-1].read_text())
    except json.JSONDecodeError:  # being written
        return False
    trials = [json.loads(entry[0]) for entry in data["trial_data"]]
    status = {t["trial_id"]: t["status"] for t in trials}
    return gated in status and all(status.get(t) == "TERMINATED" for t in finished)


@pytest.mark.slow  # a race's driver killed mid-training, then resumed
def test_a_race_killed_mid_training_resumes_without_screening_again(ray_cluster, tmp_path):
    data = gated_sweep(
        tmp_path,
        "raced",
        [0.001, 0.003],
        gated_lr=0.003,
        max_concurrent_trials=1,
        trainer={"max_epochs": 2, "accelerator": "cpu"},
        search={"algorithm": "race", "race": {"rounds": 8, "round_s": 0.1}},
    )
    data["space"]["precision"] = ["32", "64"]
    config = tmp_path / "raced.yaml"
    config.write_text(yaml.safe_dump(data))
    args = ("--config", str(config), "--address", ray_cluster.address)
    driver = subprocess.Popen(cli(*args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # A trial at lr 0.003 reports epoch 1, then waits at the gate; the driver writes
        # its result.json.
        wait_for(lambda: Path(f"{tmp_path / 'gate'}.waiting").exists(), "the gated trial")
        experiment_dir = next((tmp_path / "runs").glob("raced-*"))

        def waiting():
            finished = finished_trials(experiment_dir)
            return [
                p
                for p in experiment_dir.glob("*/result.json")
                if p.parent.name not in finished and p.read_text().strip()
            ]

        wait_for(waiting, "the gated trial's first result")
        gated = waiting()[0].parent.name
        before = finished_trials(experiment_dir)
        wait_for(lambda: _committed(experiment_dir, before, gated), "Tune's state committed")
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    assert before, "no trial finished before the kill"
    (tmp_path / "gate").touch()
    wait_cpus_freed()

    resumed = run(cli(*args, "--resume"))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "race: the screen's rounds read back; not screened again" in resumed.stdout
    assert "race: screening" not in resumed.stdout
    after = finished_trials(experiment_dir)
    for trial_id, results in before.items():
        assert after[trial_id] == results, f"{trial_id} was rerun"
    # The race ran on to its end: the reference at both lrs, and the summary's race lines.
    reference = [
        t
        for t in after
        if json.loads((experiment_dir / t / "params.json").read_text())["precision"] == "32"
    ]
    assert len(reference) == 2
    assert "race: trained 32 + eager" in resumed.stdout
    assert "compute: " in resumed.stdout


def test_a_race_dry_run_lists_the_most_trials_it_trains(capsys):
    args = ["--set", "search.algorithm=race", "--dry-run"]
    assert run_main(main, args) == 0
    out = capsys.readouterr().out
    assert "race: the settings are screened first; these are the most trials it trains" in out
    assert "16 trials (race search, fifo scheduler)" in out


def test_a_race_whose_rounds_cannot_eliminate_is_refused_at_load(sweep_config):
    with pytest.raises(ConfigError) as error:
        sweep_config(
            space={"precision": ["32", "bf16-mixed", "64"]},
            search={"algorithm": "race", "race": {"rounds": 6}},
        )
    assert str(error.value).endswith(
        "search.race.rounds: 6 cannot eliminate any setting: with 2 settings raced against "
        "the reference at alpha 0.05, the rule needs 7 straight losing rounds; use at least 7"
    )
