"""Locked budgets and where they come from, in a real JupyterLab: the spawner's budget that
the user's command line cannot lift, and the hub service's budgets."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_gpucost.core.hub_protocol import ENV_HUB_URL, HubBudget, HubReply

from .conftest import screenshot

pytestmark = pytest.mark.browser

TOKEN = "hub-token-of-this-server"
REPLY = HubReply(
    user="alice",
    session_micro_usd=1_000_000,
    today_micro_usd=3_000_000,
    month_micro_usd=40_000_000,
    budgets=(
        HubBudget("day", 10_000_000, 3_000_000, "user"),
        HubBudget("month", 100_000_000, 40_000_000, "group:physics"),
    ),
)


@pytest.fixture
def hub_service() -> Iterator[str]:
    """The hub service's report endpoint on loopback, answering with REPLY."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Authorization") != f"token {TOKEN}":
                self.send_error(403)
                return
            out = json.dumps(REPLY.to_json()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/services/gpucost/"
    finally:
        server.shutdown()
        server.server_close()


def open_panel(page: Any, lab: Any) -> Any:
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    page.locator("#jp-gpucost-status").click()
    panel = page.locator("#jp-gpucost-panel")
    expect(panel).to_be_visible(timeout=30_000)
    return panel


def test_the_spawners_budget_is_shown_locked_with_its_source(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.hard_budget_usd=1000000",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
        env={"GPUCOST_BUDGET_USD": "2.5"},
    )
    panel = open_panel(page, lab)
    hard = panel.locator("[data-budget='hard']")
    expect(hard).to_contain_text("Admin\u2019s budget (locked)", timeout=30_000)
    expect(hard.locator("[data-field='source']")).to_contain_text(
        "set by the spawner (GPUCOST_BUDGET_USD)"
    )
    expect(hard).to_contain_text("of $2.50 per session")
    expect(page.locator("#jp-gpucost-budget")).to_contain_text("🔒 budget")
    expect(page.locator("#jp-gpucost-budget")).to_contain_text("of $2.50")


def test_the_hubs_budgets_are_shown_locked_set_by_your_hub_admin(
    lab_factory: Any, page: Any, tmp_path: Path, hub_service: str
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.hub_report_interval_s=1",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
        env={ENV_HUB_URL: hub_service, "JUPYTERHUB_API_TOKEN": TOKEN},
    )
    panel = open_panel(page, lab)
    mine = panel.locator("[data-budget='hub'][data-owner='user']")
    expect(mine).to_contain_text("Hub budget (locked)", timeout=30_000)
    expect(mine.locator("[data-field='source']")).to_contain_text("set by your hub admin")
    expect(mine).to_contain_text("$3.00 of $10.00 per day spent (30%)")
    group = panel.locator("[data-budget='hub'][data-owner='group:physics']")
    expect(group).to_contain_text("Hub budget for group physics (locked)")
    expect(group).to_contain_text("$40.00 of $100.00 per month spent (40%)")
    item = page.locator("#jp-gpucost-budget")
    expect(item).to_contain_text("🔒 budget 30% of $10.00")
    screenshot(page, "budget-hub.png")
