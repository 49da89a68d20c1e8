"""The dry run lists trials in the order Tune starts them."""

from ray.tune.search.variant_generator import generate_variants

from versatil.sweep.config import load_sweep
from versatil.sweep.shipped import shipped_sweeps
from versatil.sweep.space import build_param_space, expand_trials


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
    started = []
    for _ in range(config.search.num_samples):
        started += [
            tuple(v[n] for n in names) for _, v in generate_variants(build_param_space(config))
        ]
    assert listed == started
    assert len(set(listed)) == 24


def test_quickstart_dry_run_order_is_tunes_order():
    config = load_sweep(shipped_sweeps()["quickstart"])
    names = list(config.space)
    listed = [tuple(t[n] for n in names) for t in expand_trials(config)]
    started = [tuple(v[n] for n in names) for _, v in generate_variants(build_param_space(config))]
    assert listed == started
