"""The registry's aliases: which trials they point at, and how a new answer moves them."""

import pytest
from mlflow.entities import LoggedModelStatus
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from versatil.stats import Estimate
from versatil.sweep.engine.tracker import pareto_aliases, version_tags
from versatil.sweep.results.answer import SettingResult, Verdict
from versatil.sweep.tracking.registry import drop_aliases, register_model


def _setting(label, trial, objective, speedup=None, no_worse=True):
    return SettingResult(
        label=label,
        setting=(label, "none", "none"),
        speed=None,
        speedup=None if speedup is None else Estimate(speedup, speedup * 0.9, speedup * 1.1, 4),
        speed_call="unmeasured" if speedup is None else "faster",
        objective=Estimate(objective, objective, objective, 1),
        change=None,
        no_worse=no_worse,
        trials=1,
        seeds=1,
        best_trial=trial,
    )


def _verdict(settings, mode="min"):
    ref = settings[0] if settings else None
    recommended = ref.best_trial if ref else None
    return Verdict("val_loss", mode, 0.01, ref, True, settings, recommended, "", [], "")


def test_fastest_is_the_no_worse_setting_with_the_highest_measured_speedup():
    settings = [
        _setting("32", "ref", 0.50, speedup=1.0),
        _setting("bf16-true", "quick-but-worse", 0.90, speedup=3.0, no_worse=False),
        _setting("bf16-mixed", "quick", 0.51, speedup=1.8),
        _setting("16-mixed", "unmeasured", 0.40),
    ]
    assert pareto_aliases(_verdict(settings)) == {"fastest": "quick", "most-accurate": "unmeasured"}
    # Higher is better under max; the best objective is then the highest.
    assert pareto_aliases(_verdict(settings, mode="max"))["most-accurate"] == "quick-but-worse"
    tags = version_tags(_verdict(settings), "quick")
    assert tags["versatil.setting"] == "bf16-mixed" and tags["versatil.speedup"] == "1.8"


def test_no_measured_speedup_no_fastest_and_no_settings_no_alias():
    unmeasured = [_setting("32", "ref", 0.5), _setting("bf16-mixed", "other", 0.4)]
    assert pareto_aliases(_verdict(unmeasured)) == {"most-accurate": "other"}
    assert pareto_aliases(_verdict([])) == {}


def _logged_model(client, experiment_id):
    run = client.create_run(experiment_id)
    model = client.create_logged_model(
        experiment_id=experiment_id, name="model", source_run_id=run.info.run_id
    )
    client.finalize_logged_model(model.model_id, LoggedModelStatus.READY)
    return model.model_id, run.info.run_id


def test_a_new_recommendation_moves_the_aliases_and_registers_no_model_twice(mlflow_server):
    client = MlflowClient(mlflow_server)
    experiment_id = client.create_experiment("registry-aliases")
    name = "registry-aliases"
    first, second = _logged_model(client, experiment_id), _logged_model(client, experiment_id)

    v1 = register_model(client, name, *first, {"versatil.setting": "a"}, ["recommended", "fastest"])
    assert client.get_model_version_by_alias(name, "fastest").version == v1
    # A re-confirm recommends the other setting: the alias moves, "fastest" stays.
    v2 = register_model(client, name, *second, {"versatil.setting": "b"})
    assert v2 != v1
    assert client.get_model_version_by_alias(name, "recommended").version == v2
    assert client.get_model_version_by_alias(name, "fastest").version == v1
    # And back again: the first model's version is found, not registered anew.
    assert register_model(client, name, *first, {"versatil.setting": "a2"}) == v1
    assert client.get_model_version_by_alias(name, "recommended").version == v1
    assert client.get_model_version(name, v1).tags["versatil.setting"] == "a2"
    versions = client.search_model_versions(f"name='{name}'")
    assert sorted(v.version for v in versions) == sorted([v1, v2])

    drop_aliases(client, name, ["fastest", "most-accurate"])  # one never set: no error
    with pytest.raises(MlflowException):
        client.get_model_version_by_alias(name, "fastest")
    assert client.get_model_version_by_alias(name, "recommended").version == v1
