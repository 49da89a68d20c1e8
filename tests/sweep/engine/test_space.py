"""The dry run lists trials in the order Tune starts them, each setting first once."""

from ray.tune.experiment import Experiment

from versatil.sweep.config.load import load_sweep
from versatil.sweep.config.planning import make_plan
from versatil.sweep.config.shipped import shipped_sweeps
from versatil.sweep.config.trials import expand_trials
from versatil.sweep.engine import space, tune_objects


def build_param_space(config):
    return space.build_param_space(make_plan(config))


def _make_searcher(config):
    return tune_objects.make_searcher(make_plan(config))


def _num_samples(config):
    return make_plan(config).tune_samples


def started_by_tune(config):
    """The configs the sweep's own search algorithm hands Tune, in order (no Ray needed).

    Each is a tuple of the config's values on ``config.axis_names`` (the seed included,
    with replicates). Without its concurrency limit: no trial ends here to free a place.
    """
    searcher = _make_searcher(config.model_copy(update={"max_concurrent_trials": None}))

    def trainable(config):
        pass

    experiment = Experiment(
        config.name, run=trainable, config=build_param_space(config),
        num_samples=_num_samples(config),
    )  # fmt: skip
    searcher.add_configurations([experiment])
    started = []
    while (trial := searcher.next_trial()) is not None:
        started.append(tuple(trial.config[n] for n in config.axis_names))
    return started


def test_dry_run_order_is_tunes_order(sweep_config):
    config = sweep_config(
        space={
            "precision": ["32", "bf16-mixed", "64"],
            "compile_mode": ["none", "default"],
            "lr": {"grid": [0.1, 0.2]},
            "width": {"grid": [8, 16]},
        },
        search={"algorithm": "grid", "num_samples": 2},
    )
    names = list(config.space)
    listed = [tuple(t[n] for n in names) for t in expand_trials(config)]
    assert listed == started_by_tune(config)
    assert len(listed) == 48 and len(set(listed)) == 24
    # Every setting once before any repeats at another lr or width: each compiled graph
    # compiles first, and its repeats find it compiled.
    settings = [(p, c) for p, c, _, _ in listed[:6]]
    assert len(set(settings)) == 6
    assert {(lr, w) for _, _, lr, w in listed[:6]} == {(0.1, 8)}


def test_quickstart_dry_run_order_is_tunes_order():
    config = load_sweep(shipped_sweeps()["quickstart"])
    names = list(config.space)
    listed = [tuple(t[n] for n in names) for t in expand_trials(config)]
    assert listed == started_by_tune(config)


def test_the_search_algorithm_keeps_max_concurrent_trials(sweep_config):
    """Tune ignores ``max_concurrent_trials`` for a generator it is handed: it must hold it."""
    for search in ({"algorithm": "grid"}, {"algorithm": "random", "num_samples": 4}):
        config = sweep_config(
            space={"lr": {"grid": [0.1, 0.2, 0.3]}}, search=search, max_concurrent_trials=1
        )
        searcher = _make_searcher(config)

        def trainable(config):
            pass

        searcher.add_configurations(
            [Experiment(config.name, run=trainable, config=build_param_space(config))]
        )
        assert searcher.next_trial() is not None
        assert searcher.next_trial() is None  # the first is still running


def test_replicates_repeat_each_configuration_once_per_seed(sweep_config):
    """Grid and random sweeps: each configuration, sampled values included, once per seed."""
    for search in (
        {"algorithm": "grid", "num_samples": 1},
        {"algorithm": "random", "num_samples": 3},
    ):
        config = sweep_config(
            space={"precision": ["32", "bf16-mixed"], "lr": {"loguniform": [1e-4, 1e-1]}},
            search=search,
            replicates=3,
            trainer={"max_epochs": 1, "accelerator": "cpu", "seed": 7},
        )
        assert config.axis_names == ["precision", "lr", "seed"]
        started = [dict(zip(config.axis_names, t, strict=True)) for t in started_by_tune(config)]
        listed = expand_trials(config)
        assert started == listed
        per_seed = len(listed) // 3
        assert per_seed == (2 if search["algorithm"] == "grid" else 3)
        # Seeds vary slowest: the first seed's trials first; the same configurations again.
        for i, seed in enumerate((7, 8, 9)):
            block = listed[i * per_seed : (i + 1) * per_seed]
            assert {t["seed"] for t in block} == {seed}
            assert [(t["precision"], t["lr"]) for t in block] == [
                (t["precision"], t["lr"]) for t in listed[:per_seed]
            ]
        assert all(isinstance(t["lr"], float) for t in listed)


def optuna_generator(config, num_samples):
    """The sweep's Optuna searcher as Tune wraps it, its experiment added (no Ray needed)."""
    from ray.tune.search import SearchGenerator

    searcher = _make_searcher(config)
    searcher.set_search_properties("val_loss", "min", build_param_space(config))
    generator = SearchGenerator(searcher)

    def trainable(config):
        pass

    generator.add_configurations(
        [
            Experiment(
                config.name,
                run=trainable,
                config=build_param_space(config),
                num_samples=num_samples,
            )
        ]
    )
    return generator


def test_optuna_replicates_through_tunes_repeater(sweep_config):
    config = sweep_config(
        space={"lr": {"loguniform": [1e-4, 1e-1]}},
        search={"algorithm": "optuna", "num_samples": 2},
        replicates=2,
    )
    assert _num_samples(config) == 4
    generator = optuna_generator(config, num_samples=4)
    first, second = generator.next_trial(), generator.next_trial()
    assert (first.config["seed"], second.config["seed"]) == (0, 1)
    assert first.config["lr"] == second.config["lr"]
    assert "__trial_index__" not in first.config


def test_a_configuration_optuna_suggests_again_trains_with_another_seed(sweep_config):
    # Two choices and six suggestions: Optuna must repeat itself.
    config = sweep_config(
        space={"precision": ["32", "bf16-mixed"]},
        search={"algorithm": "optuna", "num_samples": 6},
        trainer={"max_epochs": 1, "accelerator": "cpu", "seed": 10},
    )
    generator = optuna_generator(config, num_samples=6)
    configs = [generator.next_trial().config for _ in range(6)]
    seeds = {}
    for c in configs:
        seeds.setdefault(c["precision"], []).append(c.get("seed", 10))
    for found in seeds.values():
        assert sorted(found) == list(range(10, 10 + len(found)))  # never the same seed twice
