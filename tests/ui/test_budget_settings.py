"""The budget in a real JupyterLab: the server's budget survives reloads, the countdown stays."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import wait_until

pytestmark = pytest.mark.browser

SETTINGS = "lab/api/settings/jupyter-gpucost:budget"


def soft_amount(lab: Any) -> Any:
    soft = lab.api("gpucost/api/budget")["soft"]
    return None if soft is None else soft["amount_usd"]


def setting(lab: Any) -> Any:
    return lab.api(SETTINGS)["settings"].get("softBudgetUsd")


def test_a_budget_set_in_the_panel_or_elsewhere_survives_a_reload(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    # a budget of 20 set earlier from the Settings Editor: on the server and in the settings
    lab.api(SETTINGS, method="PUT", body={"raw": '{"softBudgetUsd": 20}'})
    lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": 20})

    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    item = page.locator("#jp-gpucost-budget")
    expect(item).to_contain_text("of $20.00", timeout=60_000)

    # set 50 in the panel's form
    page.locator("#jp-gpucost-status").click()
    form = page.locator("#jp-gpucost-panel .jp-gpucost-budget-form")
    expect(form).to_be_visible(timeout=30_000)
    form.locator("input").fill("50")
    form.get_by_role("button", name="Set").click()
    wait_until("the budget of 50 on the server", lambda: soft_amount(lab) == 50, 15)
    wait_until("the settings to follow the server", lambda: setting(lab) == 50, 15)

    # a reload sends nothing: the budget stays 50
    page.reload(timeout=60_000)
    expect(item).to_contain_text("of $50.00", timeout=60_000)
    page.wait_for_timeout(7_000)  # more than two budget polls
    assert soft_amount(lab) == 50
    expect(item).to_contain_text("of $50.00")

    # set elsewhere (%gpucost budget, the API) while the page is open: kept too
    lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": 30})
    expect(item).to_contain_text("of $30.00", timeout=15_000)
    wait_until("the settings to follow the server", lambda: setting(lab) == 30, 15)
    page.reload(timeout=60_000)
    expect(item).to_contain_text("of $30.00", timeout=60_000)
    page.wait_for_timeout(7_000)
    assert soft_amount(lab) == 30


def test_the_countdown_stays_after_raise_budget_then_cancel(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        "--GpuCost.budget_grace_s=60",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    kernel = lab.api("api/kernels", method="POST", body={})
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    page.locator("#jp-gpucost-status").wait_for(state="visible", timeout=60_000)
    spent = lab.api("gpucost/api/status")["cost_usd"]
    lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": round(spent + 0.004, 6)})

    countdown = re.compile(r"Your budget is spent\. .* in 0:\d\d")
    raise_button = page.get_by_role("button", name="Raise budget")
    expect(raise_button).to_be_visible(timeout=30_000)
    raise_button.click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Raise your budget", timeout=10_000)
    dialog.get_by_role("button", name=re.compile("^Cancel$", re.IGNORECASE)).click()
    expect(dialog).to_have_count(0, timeout=10_000)

    # the countdown is still there, counting down, with both buttons
    expect(page.get_by_text(countdown)).to_be_visible(timeout=5_000)
    expect(page.get_by_role("button", name="Save and stop now")).to_be_visible()
    expect(raise_button).to_be_visible()
    first = page.get_by_text(countdown).inner_text()
    page.wait_for_timeout(2_000)
    assert page.get_by_text(countdown).inner_text() != first

    # and a budget that is not a whole number is accepted
    raise_button.click()
    expect(dialog).to_contain_text("Raise your budget", timeout=10_000)
    dialog.locator("input").fill("7.5")
    ok = dialog.get_by_role("button", name=re.compile("^OK$", re.IGNORECASE))
    expect(ok).to_be_enabled()
    ok.click()
    expect(page.locator("#jp-gpucost-budget")).to_contain_text("of $7.50", timeout=15_000)
    expect(page.get_by_text(countdown)).to_have_count(0, timeout=15_000)
    assert soft_amount(lab) == 7.5
    assert lab.api("gpucost/api/budget")["grace"] is None
    assert kernel["id"] in [k["id"] for k in lab.api("api/kernels")]


def test_the_budget_is_shown_in_the_server_currency(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.currency=EUR",
        "--GpuCost.currency_symbol=€",
        # the catalog has no price in euros: the admin says what an unpriced GPU costs
        "--GpuCost.unknown_gpu_usd_per_hour=20",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": 5})
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    item = page.locator("#jp-gpucost-budget")
    expect(item).to_contain_text(re.compile(r"^budget \d+% of €5\.00$"), timeout=60_000)
    title = item.get_attribute("title") or ""
    assert "Your budget: €5.00 per session, €" in title, title
    assert "$" not in title, title

    page.locator("#jp-gpucost-status").click()
    panel = page.locator("#jp-gpucost-panel")
    expect(panel.locator(".jp-gpucost-budget-form label")).to_have_text(
        "Your budget (€)", timeout=30_000
    )
    expect(panel.locator("[data-budget='soft']")).to_contain_text("of €5.00 per session")
    expect(panel.locator(".jp-gpucost-chart-legend")).to_contain_text(
        "spend rate (€/h): €", timeout=30_000
    )
    expect(panel.locator(".jp-gpucost-panel-budget")).not_to_contain_text("$")
