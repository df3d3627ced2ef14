"""The hub's allowances where the user works, in a real JupyterLab: the cost panel's budget
section and the status bar's tooltip say what is left, when it fills up and that the hub set
it, read-only (the hub service's report endpoint on loopback answers with them)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_gpucost.core.hub_protocol import ENV_HUB_URL, HubAllowance, HubBudget, HubReply

from . import test_budget_sources
from .conftest import screenshot
from .test_budget_sources import TOKEN, hub_service, open_panel

pytestmark = pytest.mark.browser

__all__ = ["hub_service"]  # the fixture, used by name

REPLY = HubReply(
    user="alice",
    session_micro_usd=1_000_000,
    today_micro_usd=3_000_000,
    month_micro_usd=7_600_000,
    budgets=(HubBudget("day", 10_000_000, 3_000_000, "user"),),
    allowances=(
        HubAllowance(
            "group:students",
            "gpu_hours",
            "week",
            10_000_000,
            6_333_333,
            datetime(2026, 11, 30, tzinfo=UTC),
        ),
        HubAllowance(
            "user", "usd", "month", 20_000_000, 12_400_000, datetime(2026, 12, 1, tzinfo=UTC)
        ),
    ),
)


@pytest.fixture
def allowance_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in hub service answers with allowances (it reads its reply per request)."""
    monkeypatch.setattr(test_budget_sources, "REPLY", REPLY)


def reporting_lab(lab_factory: Any, tmp_path: Path, hub_service: str) -> Any:
    """A JupyterLab whose server reports to the stand-in hub service every second."""
    return lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.hub_report_interval_s=1",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
        env={ENV_HUB_URL: hub_service, "JUPYTERHUB_API_TOKEN": TOKEN},
    )


def test_the_hubs_allowances_show_what_is_left_read_only(
    allowance_reply: None, lab_factory: Any, page: Any, tmp_path: Path, hub_service: str
) -> None:
    lab = reporting_lab(lab_factory, tmp_path, hub_service)
    panel = open_panel(page, lab)
    lines = panel.locator("[data-field='hub-allowance']")
    expect(lines).to_have_count(2, timeout=30_000)
    hours, money = lines.nth(0), lines.nth(1)
    expect(hours.locator("[data-field='allowance-left']")).to_have_text(
        "6 h 20 min of GPU time left this week"
    )
    expect(hours.locator("[data-field='allowance-refill']")).to_contain_text("fills up again at")
    expect(hours.locator("[data-field='allowance-source']")).to_have_text(
        "group students, set by your hub admin (read-only)"
    )
    expect(money.locator("[data-field='allowance-left']")).to_have_text("$12.40 left this month")
    expect(money.locator("[data-field='allowance-source']")).to_have_text(
        "set by your hub admin (read-only)"
    )
    # read-only: nothing to type into or press
    expect(panel.locator("[data-field='hub-allowances'] input")).to_have_count(0)
    expect(panel.locator("[data-field='hub-allowances'] button")).to_have_count(0)
    # the status bar's budget item says it in its tooltip
    expect(page.locator("#jp-gpucost-budget")).to_have_attribute(
        "title", re.compile(r"Hub allowance: 6 h 20 min of GPU time left this week · fills up")
    )
    panel.locator("[data-field='hub-allowances']").scroll_into_view_if_needed()
    screenshot(page, "budget-hub-allowances.png")


ALLOWANCES_ONLY = replace(REPLY, budgets=())


@pytest.fixture
def allowances_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub sets allowances and no money budget."""
    monkeypatch.setattr(test_budget_sources, "REPLY", ALLOWANCES_ONLY)


def test_with_allowances_and_no_budget_the_bars_say_what_is_left(
    allowances_only: None, lab_factory: Any, page: Any, tmp_path: Path, hub_service: str
) -> None:
    lab = reporting_lab(lab_factory, tmp_path, hub_service)
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    # JupyterLab's status bar: the allowance that runs out first (62 % of the
    # money left against 63 % of the GPU time), the others in the tooltip
    item = page.locator("#jp-gpucost-budget")
    expect(item).to_have_text("$12.40 left this month", timeout=60_000)
    expect(item).to_have_attribute("data-budget", "ok")
    expect(item).to_have_attribute(
        "title", re.compile(r"Hub allowance: 6 h 20 min of GPU time left this week · fills up")
    )
    screenshot(page, "budget-hub-allowances-only.png")
    # Notebook 7's top bar says the same after the cost
    page.goto(f"{lab.url}/tree?token={lab.token}", timeout=60_000)
    chip = page.locator(".jp-gpucost-topbar-budget")
    expect(chip).to_have_text(" · $12.40 left this month", timeout=60_000)
    expect(page.locator(".jp-gpucost-TopBarItem")).to_have_attribute(
        "title", re.compile(r"Hub allowance: \$12\.40 left this month · fills up")
    )
