"""Check the MLflow UI in a real browser: child runs nest under the sweep's parent run.

Starts ``mlflow server`` on 127.0.0.1, runs a small sweep against it on a local Ray, and
opens the sweep's experiment in headless Chromium (Debian's ``chromium``, driven by the
``playwright`` package; no browser download) as a newcomer meets it: MLflow 3.17 opens it
in its GenAI view (Traces, Judges, logged models listed as "Agent versions"), checked and
saved; one click on "Model training" switches to the runs table. There it expands the
parent run, checks that every trial's child run is listed under it, opens one child run and
checks that its ``precision`` param and its parent are shown, and saves screenshots under
``docs/``::

    apt-get install -y chromium && pip install playwright
    python docs/check_mlflow_ui.py

Exits non-zero (with the reason) when a check fails.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.mlflow_server import start_mlflow_server, stop_mlflow_server  # noqa: E402

GENAI_VIEW = ("GenAI", "Model training", "Traces", "Judges", "Agent versions")
"""What MLflow 3.17 shows first for an experiment: its GenAI view and the switch beside it."""

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def main() -> int:
    from mlflow.tracking import MlflowClient
    from playwright.sync_api import sync_playwright

    from versatil.sweep import run_sweep, validate_sweep
    from versatil.sweep.tracking import child_runs

    root = Path(tempfile.mkdtemp(prefix="versatil-ui-"))
    server, uri = start_mlflow_server(root)
    try:
        config = validate_sweep(
            {
                "name": "ui_check",
                "task": {"name": "reaching", "params": {"n_episodes": 32, "horizon": 20}},
                "space": {"precision": ["32", "bf16-true"], "lr": {"grid": [0.003, 0.01]}},
                "trainer": {"max_epochs": 2, "accelerator": "cpu"},
                "max_concurrent_trials": 2,
                "storage_path": str(root / "runs"),
            }
        )
        outcome = run_sweep(config, tracking_uri=uri, stream=io.StringIO())
        client = MlflowClient(uri)
        children = child_runs(client, outcome.tracking)
        parent = client.get_run(outcome.tracking.parent_run_id)
        names = sorted(run.info.run_name for run in children)
        experiment_id = outcome.tracking.experiment_id
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS
            )
            page = browser.new_page(viewport={"width": 1600, "height": 900})
            # A newcomer's first view: the experiment in MLflow's GenAI view, no runs shown.
            page.goto(f"{uri}/#/experiments/{experiment_id}")
            for label in GENAI_VIEW:
                page.get_by_text(label, exact=True).first.wait_for(timeout=60_000)
            assert page.get_by_text(parent.info.run_name).count() == 0, "runs in GenAI view"
            # Its first visit opens a modal tip ("Detect Issues in Your Traces"): dismissed.
            page.get_by_role("button", name="Got it").click(timeout=60_000)
            page.get_by_text("Latency", exact=True).first.wait_for(timeout=60_000)
            page.screenshot(path=str(REPO / "docs" / "mlflow_ui_genai_view.png"))
            # One click on the view switch: the runs table, the sweep's parent run in it.
            page.get_by_text("Model training", exact=True).first.click()
            page.get_by_text(parent.info.run_name).first.wait_for(timeout=60_000)
            for name in names:  # collapsed: the children are not listed yet
                assert page.get_by_text(name, exact=True).count() == 0, f"{name} not nested"
            # The expand control is the icon button in the parent row's Run Name cell.
            parent_row = page.locator(".ag-row", has_text=parent.info.run_name).first
            parent_row.locator("button[data-component-id*='runnamecellrenderer']").click()
            for name in names:
                page.get_by_text(name, exact=True).first.wait_for(timeout=30_000)
            page.screenshot(path=str(REPO / "docs" / "mlflow_ui_nested_runs.png"))

            child = children[0]
            page.goto(f"{uri}/#/experiments/{experiment_id}/runs/{child.info.run_id}")
            page.get_by_text("precision", exact=True).first.wait_for(timeout=60_000)
            page.get_by_text(child.data.params["precision"], exact=True).first.wait_for()
            page.get_by_text(parent.info.run_name).first.wait_for()
            page.get_by_text("precision", exact=True).first.scroll_into_view_if_needed()
            page.screenshot(path=str(REPO / "docs" / "mlflow_ui_child_run.png"))
            browser.close()
        print(
            f"ok: the experiment opened in the GenAI view ({', '.join(GENAI_VIEW)}); "
            f"after Model training, {len(names)} child runs nested under {parent.info.run_name}; "
            f"child {child.info.run_name} shows precision={child.data.params['precision']}"
        )
        return 0
    finally:
        stop_mlflow_server(server)


if __name__ == "__main__":
    sys.exit(main())
