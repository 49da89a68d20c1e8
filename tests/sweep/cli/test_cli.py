"""``python -m versatil.sweep``: the quickstart with no arguments, the flags, bad input."""

import io
import os
import re
import socket
import subprocess
import sys
import threading
import time
import types

import pytest

from versatil.cli_common import run_main
from versatil.sweep.cli.main import build_parser, build_report_parser, main
from versatil.training.constants import PrecisionType


@pytest.mark.slow  # the whole quickstart sweep, in a driver of its own
def test_zero_argument_quickstart_runs_locally_and_summarizes(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # The CLI as ``python -m`` runs it, plus a report at exit of what the driver imported
    # (the command ends its process with os._exit, past any atexit handler).
    driver = (
        "import os, runpy, sys\n"
        "end = os._exit\n"
        "def report(code):\n"
        "    imported = sorted(m for m in ('torch', 'lightning', 'mlflow') if m in sys.modules)\n"
        "    print('driver imported:', imported, flush=True)\n"
        "    end(code)\n"
        "os._exit = report\n"
        "sys.argv = ['versatil.sweep', '--set', 'trainer.max_epochs=1']\n"
        "runpy.run_module('versatil.sweep', run_name='__main__', alter_sys=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", driver],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert re.search(r"16 trials in [\d.]+s: 12 completed, 4 infeasible", out), out[-2000:]
    assert re.search(r"^best: \w+ val_loss=[\d.]+ precision=", out, re.MULTILINE)
    checkpoint = re.search(r"^best checkpoint: (.+)$", out, re.MULTILINE).group(1)
    assert checkpoint.startswith(str(tmp_path / "runs" / "sweeps" / "quickstart-"))
    assert os.path.isfile(os.path.join(checkpoint, "last.ckpt"))
    # The driver trains nothing: torch and Lightning load only in the workers.
    assert "driver imported: ['mlflow']" in out
    # Tune's own console output stays off: the sweep prints its progress and paths itself.
    for noise in ("Configuration for experiment", "View detailed results here"):
        assert noise not in out + result.stderr
    header = next(line for line in out.splitlines() if " trial " in line)
    for column in ("precision", "compile_mode", "lr", "val_loss", "samples_per_sec", "status"):
        assert column in header


def cli(capsys, command, argv: list[str]) -> tuple[int, str, str]:
    """Runs a CLI's ``main`` in this process: its exit status, stdout and stderr."""
    code = run_main(command, argv)
    out, err = capsys.readouterr()
    return code, out, err


def option_strings(parser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def test_cli_flags_are_frozen():
    """New flags are a public-surface change: add them here on purpose."""
    assert option_strings(build_parser()) == {
        "-h",
        "--help",
        "--config",
        "--address",
        "--storage-path",
        "--tracking-uri",
        "--resume",
        "--auto-resume",
        "--dry-run",
        "--no-confirm",
        "--set",
    }
    from versatil.sweep.cli import confirm
    from versatil.sweep.cli.main import standalone_parser

    assert option_strings(standalone_parser(confirm)) == {
        "-h",
        "--help",
        "--storage-path",
        "--tracking-uri",
        "--address",
        "--rounds",
    }
    assert option_strings(build_report_parser()) == {
        "-h",
        "--help",
        "--tracking-uri",
        "--storage-path",
        "--format",
        "--output",
    }


def test_help_lists_the_report_subcommand_and_its_flags(capsys):
    code, out, _ = cli(capsys, main, ["--help"])
    assert code == 0
    assert re.search(r"^ +report +compare a finished sweep's trials", out, re.MULTILINE)
    for name in ("compress", "sync"):
        assert re.search(rf"^ +{name} +\S", out, re.MULTILINE), name
    shipped = "shipped sweep by name: asha_lr, frontier, gpu, pbt, precision_matrix, quickstart"
    assert shipped in " ".join(out.split())
    code, out, _ = cli(capsys, main, ["report", "--help"])
    assert code == 0
    assert out.startswith("usage: python -m versatil.sweep report")
    for flag in option_strings(build_report_parser()):
        assert flag in out


def test_every_command_prints_to_the_stream_it_is_given(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    code = run_main(lambda argv: main(argv, out=out), ["--dry-run"])
    assert (code, capsys.readouterr()) == (0, ("", ""))
    assert "sweep 'quickstart': 16 trials" in out.getvalue()


def test_a_subcommand_after_the_run_options_is_refused(capsys):
    code, out, err = cli(capsys, main, ["--dry-run", "report", "x"])
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        "python -m versatil.sweep: error: report: the subcommand comes first: "
        "python -m versatil.sweep report ..."
    )


@pytest.mark.parametrize("name", ["asha_lr", "asha_lr.yaml"])
def test_config_takes_a_shipped_sweep_by_name(capsys, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, main, ["--config", name, "--dry-run"])
    assert (code, err) == (0, "")
    assert "sweep 'asha_lr': 16 trials" in out


def test_an_alias_works_in_both_clis_and_a_bad_value_is_named(capsys, monkeypatch, tmp_path):
    from versatil.training import fit
    from versatil.training.__main__ import main as train_main

    aliases = ["--set", "space.precision=[bf16, bf16-mixed, 32-true]", "--dry-run"]
    code, out, err = cli(capsys, main, aliases)
    assert (code, err) == (0, "")
    assert "sweep 'quickstart': 8 trials" in out
    rows = [line.split()[1] for line in out.splitlines() if line[:1].isdigit()]
    assert sorted(set(rows)) == ["32", "bf16-mixed"]

    code, _, err = cli(capsys, main, ["--set", "space.precision=[bf16-mix]", "--dry-run"])
    assert code == 2
    assert err.endswith(
        "quickstart.yaml: space.precision: 'bf16-mix' is not a PrecisionType valid for "
        "training; choose from 32, 16-mixed, bf16-mixed, 16-true, bf16-true, 64\n"
    )

    trained = []

    def fake_train(config, output, on_epoch_end):
        trained.append(config)
        return types.SimpleNamespace(status="completed", checkpoint_dir=output)

    monkeypatch.setattr(fit, "train", fake_train)
    argv = ["--precision", "bf16", "--accelerator", "cpu", "--output", str(tmp_path)]
    code, out, err = cli(capsys, train_main, argv)
    assert (code, err) == (0, "")
    assert trained[0].precision is PrecisionType.BF16_MIXED

    code, _, err = cli(capsys, train_main, ["--precision", "bf16-mix"])
    assert code == 2
    assert err == (
        "error: precision: 'bf16-mix' is not a PrecisionType; "
        "choose from 8, 32, 16-mixed, bf16-mixed, 16-true, bf16-true, 64\n"
    )


def test_report_rejects_a_name_that_would_escape_its_output_directory(capsys):
    code, out, err = cli(capsys, main, ["report", "../../etc"])
    assert (code, out) == (2, "")
    assert err == (
        "error: report: experiment: '../../etc' is not a valid name: use letters, digits, '.', "
        "'_' and '-', starting with a letter or digit, at most 100 characters\n"
    )


@pytest.fixture
def hanging_server():
    """An http:// URI whose server accepts connections and never answers; closed at the end."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    accepted: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:  # the listener was closed: stop
                return
            accepted.append(connection)  # held open, never read, never answered

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.shutdown(socket.SHUT_RDWR)
    listener.close()
    thread.join(timeout=30)
    assert not thread.is_alive()
    for connection in accepted:
        connection.close()


@pytest.mark.parametrize("command", ["sweep", "report"])
@pytest.mark.parametrize("server", ["dead", "hanging"])
def test_an_unreachable_tracking_server_fails_within_seconds(
    capsys, tmp_path, request, command, server
):
    # Port 9 (discard) has nothing listening; the hanging server accepts and never answers.
    uri = "http://127.0.0.1:9" if server == "dead" else request.getfixturevalue("hanging_server")
    storage = str(tmp_path / "runs")
    if command == "sweep":
        argv = ["--tracking-uri", uri, "--storage-path", storage, "--set", "trainer.max_epochs=1"]
    else:
        argv = ["report", "quickstart", "--tracking-uri", uri]
    start = time.monotonic()
    code, out, err = cli(capsys, main, argv)
    took = time.monotonic() - start
    reason = "[Errno 111] Connection refused" if server == "dead" else "no answer within 5 s"
    assert (code, out) == (2, "")
    assert err == (
        f"error: --tracking-uri: no MLflow server answers at {uri!r} ({reason}); start one "
        "(mlflow server --host 127.0.0.1 --port 5000) or omit --tracking-uri to use the "
        "embedded SQLite store\n"
    )
    assert took < 30, f"{command} against a {server} server took {took:.1f} s"
    print(f"{command}, {server} server: exit 2 after {took:.1f} s")
