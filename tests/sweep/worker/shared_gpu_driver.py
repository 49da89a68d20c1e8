"""A sweep on a local Ray that declares one GPU; what its trials and its end saw, as JSON.

Usage: ``python -m tests.sweep.worker.shared_gpu_driver SWEEP_JSON OUT_JSON``. Ray starts
here with 2 CPUs and 1 GPU (declared: no GPU is needed), so trials with ``resources.gpu:
0.5`` share it. The re-timing's task records the GPUs Ray assigned it in its rounds.
"""

import json
import sys
from pathlib import Path

import ray

from versatil.sweep.config.load import validate_sweep
from versatil.sweep.engine import confirm
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.results.records import read_trials
from versatil.sweep.results.verdict import make_verdict


def _retime_recording_gpus(contenders, options):
    """The re-timing task, with the GPUs Ray assigned it added to its rounds."""
    import ray

    from versatil.sweep.engine.confirm import _retime_task

    rounds = _retime_task(contenders, options)
    assigned = ray.get_runtime_context().get_assigned_resources()
    return {**rounds, "assigned_gpus": assigned.get("GPU", 0.0)}


def main(sweep_json: str, out_json: str) -> None:
    data = json.loads(Path(sweep_json).read_text())
    config = validate_sweep(data)
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, logging_level="WARNING")
    confirm._retime_task = _retime_recording_gpus
    outcome = run_sweep(config)
    metric, mode = config.objective.metric, config.objective.mode
    unconfirmed = make_verdict(outcome.rows, metric, mode, config.objective.tolerance)
    verdict = outcome.judgement.verdict
    report = {
        "epochs": {
            record.trial_id: {str(e): r for e, r in record.epochs().items()}
            for record in read_trials(outcome.experiment_dir)
        },
        "rows": {r.trial_id: r.metrics for r in outcome.rows},
        "calls_before_retiming": {s.label: s.speed_call for s in unconfirmed.settings},
        "calls": {s.label: [s.speed_call, s.rounds] for s in verdict.settings},
        "assigned_gpus": (outcome.confirmation or {}).get("assigned_gpus"),
        "text": verdict.text,
    }
    Path(out_json).write_text(json.dumps(report, default=str))
    ray.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
