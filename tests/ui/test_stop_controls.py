"""The budget's stop controls as a user meets them: a manual "Stop server" asks first and
Cancel starts nothing; confirmed, it counts down as a manual stop (never as a spent budget,
and with no Raise budget); a budget's countdown offers Raise budget; the panel leads with
the time left at the current rate (JupyterLab light and dark, Notebook 7, 中文)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import screenshot, wait_until

pytestmark = pytest.mark.browser

ITEM = "#jp-gpucost-status"
BUDGET = "#jp-gpucost-budget"
TOP_BAR = ".jp-gpucost-TopBarItem"
#: $1,000 at the simulated 2 × A100's $6.86/h: about 145 h
LEFT = re.compile(r"^about 1\d\d h \d+ min left at \$6\.86/h$")


def start(lab_factory: Any, tmp_path: Path) -> Any:
    """A server on 2 simulated A100s with a budget of mine of $1,000, barely touched, and
    a long grace: the stop counts down long enough to be read."""
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        "--GpuCost.budget_grace_s=600",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": 1000})
    return lab


def counting_down(lab: Any) -> bool:
    return bool(lab.api("gpucost/api/budget")["state"] == "grace")  # type: ignore[index]


def cancel_with_the_dialog(page: Any, panel: Any, label: str) -> None:
    panel.get_by_role("button", name=label, exact=True).click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_be_visible(timeout=30_000)
    dialog.locator("button.jp-mod-reject").click()
    expect(dialog).to_have_count(0, timeout=15_000)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_jupyterlab_a_manual_stop_asks_first_and_counts_down_as_a_manual_stop(
    lab_factory: Any, page: Any, tmp_path: Path, theme: str
) -> None:
    lab = start(lab_factory, tmp_path)
    if theme == "dark":
        lab.api(
            "lab/api/settings/@jupyterlab/apputils-extension:themes",
            method="PUT",
            body={"raw": json.dumps({"theme": "JupyterLab Dark"})},
        )
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    page.locator(ITEM).click(timeout=60_000)
    panel = page.locator("#jp-gpucost-panel")
    expect(panel).to_be_visible(timeout=30_000)
    if theme == "dark":
        expect(page.locator("body")).to_have_attribute(
            "data-jp-theme-light", "false", timeout=30_000
        )

    # the headline: how long the budget lasts at the current rate
    expect(panel.locator("[data-field='time-left']")).to_have_text(LEFT, timeout=30_000)
    # the stop buttons are secondary: outlined, not filled red
    stop = panel.get_by_role("button", name="Stop server", exact=True)
    expect(stop).to_have_class(re.compile(r"\bjp-gpucost-stop-button\b"))
    expect(stop).not_to_have_class(re.compile(r"\bjp-mod-warn\b"))
    screenshot(page, f"stop-controls-panel-{theme}.png")

    # asked first; Cancel starts nothing
    stop.click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Stop this server?", timeout=30_000)
    expect(dialog).to_contain_text("A countdown you can cancel starts now")
    screenshot(page, f"stop-controls-confirm-{theme}.png")
    dialog.locator("button.jp-mod-reject").click()
    expect(dialog).to_have_count(0, timeout=15_000)
    page.wait_for_timeout(2_000)
    assert not counting_down(lab)
    expect(page.locator(BUDGET)).not_to_contain_text("stop")
    cancel_with_the_dialog(page, panel, "Stop server when done")
    page.wait_for_timeout(1_000)
    assert lab.api("gpucost/api/budget")["stop_when_idle"] is None  # type: ignore[index]

    # confirmed: a manual stop's countdown, worded as one, with no Raise budget
    stop.click()
    expect(dialog).to_be_visible(timeout=30_000)
    dialog.locator("button.jp-mod-warn").click()
    wait_until("the manual stop's countdown", lambda: counting_down(lab), 30)
    item = page.locator(BUDGET)
    expect(item).to_have_text(re.compile(r"^manual stop in (10:00|9:\d\d)$"), timeout=30_000)
    expect(page.locator(ITEM)).not_to_have_attribute("data-budget", "exceeded")
    expect(page.get_by_text(re.compile(r"^Stopping as you asked\. "))).to_be_visible(timeout=30_000)
    expect(page.get_by_role("button", name="Save and stop now")).to_be_visible()
    expect(page.get_by_role("button", name="Raise budget")).to_have_count(0)
    expect(page.get_by_text("budget spent")).to_have_count(0)
    countdown = panel.locator("[data-field='countdown']")
    expect(countdown).to_have_attribute("data-reason", "user", timeout=30_000)
    expect(countdown).to_contain_text("Manual stop: notebooks saved, then the stop at")
    # the budget's own plan stands: a manual stop is not the budget running out
    expect(panel.locator("[data-field='time-left']")).to_have_text(LEFT)
    expect(panel.locator("[data-field='budget-stop']")).to_contain_text("in about 1")
    screenshot(page, f"stop-controls-manual-{theme}.png")

    # cancelled from the panel: nothing stops
    panel.get_by_role("button", name="Cancel stop").click()
    wait_until("the stop cancelled", lambda: not counting_down(lab), 30)
    expect(item).to_contain_text("budget", timeout=30_000)


def test_notebook7_a_manual_stop_then_a_budget_countdown_with_raise_budget(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = start(lab_factory, tmp_path)
    page.goto(f"{lab.url}/tree?token={lab.token}", timeout=60_000)
    chip = page.locator(TOP_BAR)
    expect(chip).to_be_visible(timeout=60_000)
    chip.click()
    panel = page.locator("#jp-gpucost-panel-widget")
    expect(panel.locator("[data-field='time-left']")).to_have_text(LEFT, timeout=30_000)

    cancel_with_the_dialog(page, panel, "Stop server")
    page.wait_for_timeout(2_000)
    assert not counting_down(lab)
    panel.get_by_role("button", name="Stop server", exact=True).click()
    page.locator(".jp-Dialog button.jp-mod-warn").click()
    budget = chip.locator(".jp-gpucost-topbar-budget")
    expect(budget).to_contain_text(re.compile(r"manual stop in (10:00|9:\d\d)"), timeout=30_000)
    expect(page.get_by_role("button", name="Raise budget")).to_have_count(0)
    screenshot(page, "stop-controls-notebook7-manual.png")
    lab.api("gpucost/api/budget/stop", method="DELETE")
    wait_until("the stop cancelled", lambda: not counting_down(lab), 30)

    # a budget of mine that runs out within the grace: its countdown (set with less than a
    # grace left, it runs the full grace) offers Raise budget
    spent = lab.api("gpucost/api/status")["cost_usd"]  # type: ignore[index]
    lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": round(spent + 0.06, 6)})
    expect(budget).to_contain_text(re.compile(r"stops at \$\S+ in \d+:\d\d"), timeout=30_000)
    expect(page.get_by_role("button", name="Raise budget")).to_be_visible(timeout=30_000)
    expect(budget).not_to_contain_text("manual")
    screenshot(page, "stop-controls-notebook7-budget.png")


def test_chinese_the_manual_stop_asks_and_counts_down_in_chinese(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = start(lab_factory, tmp_path)
    lab.api(
        "lab/api/settings/@jupyterlab/translation-extension:plugin",
        method="PUT",
        body={"raw": json.dumps({"locale": "zh_CN"})},
    )
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    expect(page.locator(".lm-MenuBar-content").first).to_contain_text("文件", timeout=60_000)
    page.locator(ITEM).click()
    panel = page.locator("#jp-gpucost-panel")
    expect(panel.locator("[data-field='time-left']")).to_contain_text("约剩", timeout=30_000)
    panel.get_by_role("button", name="停止服务器", exact=True).click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("停止此服务器？", timeout=30_000)  # noqa: RUF001
    dialog.locator("button.jp-mod-warn").click()
    expect(page.locator(BUDGET)).to_contain_text("手动停止", timeout=30_000)
    expect(panel.locator("[data-field='countdown']")).to_contain_text("手动停止", timeout=30_000)
    expect(page.get_by_role("button", name="提高预算")).to_have_count(0)
    screenshot(page, "stop-controls-zh.png")
    lab.api("gpucost/api/budget/stop", method="DELETE")
