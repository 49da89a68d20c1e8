"""``python -m versatil.training``: one training run of a task, printed epoch by epoch."""

from __future__ import annotations

import argparse
from pathlib import Path

from versatil.cli_common import parse_assignment, quiet_libraries, run_cli
from versatil.status import TrialStatus
from versatil.tables import format_table
from versatil.training.constants import CompileMode, Float32MatmulPrecision, PrecisionType
from versatil.training.metric_names import EPOCH_TIME_S, PEAK_MEMORY_MB, SAMPLES_PER_SEC
from versatil.training.spec import ACCELERATORS


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser; values are checked later, by TrainConfig."""
    parser = argparse.ArgumentParser(
        prog="python -m versatil.training",
        description="Train one Lightning policy under the given precision settings.",
    )
    parser.add_argument(
        "--task", default="reaching", help="built-in task or package.module:factory"
    )
    parser.add_argument(
        "--precision", default="32", help=f"one of {', '.join(PrecisionType)} (default 32)"
    )
    parser.add_argument(
        "--compile-mode", default=None, help=f"one of {', '.join(CompileMode)}; omit for eager"
    )
    parser.add_argument(
        "--matmul-precision", default=None, help=f"one of {', '.join(Float32MatmulPrecision)}"
    )
    parser.add_argument("--max-epochs", type=int, default=3, help="epochs to train, at least 1")
    parser.add_argument(
        "--seed", type=int, default=0, help="seeds torch, numpy and Python for the run"
    )
    parser.add_argument(
        "--accelerator",
        default="auto",
        help=f"the Lightning accelerator: one of {', '.join(ACCELERATORS)}",
    )
    parser.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="a task param, repeatable"
    )
    parser.add_argument(
        "--output", type=Path, default=Path("runs/train"), help="checkpoint directory"
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``sys.argv`` when ``argv`` is None); values are checked by TrainConfig."""
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Trains one run, prints its epochs as a table, and returns the exit status.

    The status is 0 when the run completed, 1 when it was infeasible, failed a settings
    check, or did not complete.
    """
    args = parse_args(argv)
    from versatil.training.config import TrainConfig
    from versatil.training.fit import InfeasibleError, train
    from versatil.training.in_effect import SettingsNotInEffectError
    from versatil.training.tasks import resolve_params

    quiet_libraries()
    config = TrainConfig.from_mapping(
        {
            "task": args.task,
            "params": resolve_params(args.task, dict(parse_assignment(p) for p in args.param)),
            "precision": args.precision,
            "compile_mode": args.compile_mode,
            "matmul_precision": args.matmul_precision,
            "max_epochs": args.max_epochs,
            "seed": args.seed,
            "accelerator": args.accelerator,
        }
    )
    columns = (
        "epoch",
        "train_loss",
        "val_loss",
        SAMPLES_PER_SEC,
        EPOCH_TIME_S,
        PEAK_MEMORY_MB,
    )
    epochs: list[list[object]] = []

    def show(trainer: object, metrics: dict[str, float]) -> None:
        epochs.append([metrics.get(c) for c in columns])
        print(f"epoch {int(metrics['epoch'])} done", flush=True)

    try:
        result = train(config, args.output, on_epoch_end=show)
    except InfeasibleError as error:
        print(f"infeasible: {error.reason}")
        return 1
    except SettingsNotInEffectError as error:
        print(format_table(columns, epochs))
        print(f"failed: {error}")
        return 1
    print(format_table(columns, epochs))
    print(f"status: {result.status}; checkpoint: {result.checkpoint_dir}")
    return 0 if result.status == TrialStatus.COMPLETED else 1


if __name__ == "__main__":
    run_cli(main)
