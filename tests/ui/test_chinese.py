"""JupyterLab set to 中文: the cost's status item, panel, budget and countdown, and the
settings schemas, are in Simplified Chinese (headless Chromium)."""

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
TOP_BAR = ".jp-gpucost-TopBarItem"
NOTEBOOK = {
    "cells": [],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}
BUDGET = "#jp-gpucost-budget"
PANEL = "#jp-gpucost-panel"


def test_jupyterlab_in_chinese_shows_the_cost_in_chinese(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        # an administrator's budget that runs out within the grace at $6.862/h (a spent
        # one acts at once): a long countdown, ending at the budget
        "--GpuCost.hard_budget_usd=1",
        "--GpuCost.budget_grace_s=600",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    lab.api(
        "lab/api/settings/@jupyterlab/translation-extension:plugin",
        method="PUT",
        body={"raw": json.dumps({"locale": "zh_CN"})},
    )
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    item = page.locator(ITEM)
    item.wait_for(state="visible", timeout=60_000)
    # JupyterLab itself is in Chinese (its language pack)...
    expect(page.locator("#jp-menu-panel, .lm-MenuBar-content").first).to_contain_text(
        "文件", timeout=30_000
    )
    # ... and so is the cost: the status item's tooltip, the budget item, the countdown
    expect(item).to_have_attribute("title", _contains("本次会话在"), timeout=30_000)
    budget = page.locator(BUDGET)
    # "8:40 后在 US$1.00 停止": it stops at the budget, which is not spent yet
    expect(budget).to_contain_text("后在", timeout=30_000)
    expect(budget).to_contain_text("停止")
    countdown = page.get_by_text(re.compile("按当前费率，管理员设置的 .* 预算即将用完。"))  # noqa: RUF001
    expect(countdown.first).to_be_visible(timeout=30_000)
    expect(countdown.first).to_contain_text("后内核将关闭")
    expect(page.get_by_role("button", name="立即保存并停止")).to_be_visible()
    screenshot(page, "zh-countdown.png")

    item.click()
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    for label in ("本次会话", "今天", "本月", "当前费率", "内核", "价格"):
        expect(panel).to_contain_text(label)
    for english in ("This session", "Rate now", "Kernels", "Prices"):
        expect(panel).not_to_contain_text(english)
    screenshot(page, "zh-panel.png")

    # the settings schemas are translated by the server, in JupyterLab's language
    schema: Any = lab.api("lab/api/settings/jupyter-gpucost:budget")
    assert schema["schema"]["title"] == "GPU 费用：预算"  # noqa: RUF001
    assert schema["schema"]["properties"]["softBudgetUsd"]["title"] == "预算（以服务器的货币计）"  # noqa: RUF001


def test_notebook7_in_chinese_shows_the_top_bar_and_the_cost_panel_in_chinese(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        "--GpuCost.hard_budget_usd=1",
        "--GpuCost.budget_grace_s=600",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    lab.api(
        "lab/api/settings/@jupyterlab/translation-extension:plugin",
        method="PUT",
        body={"raw": json.dumps({"locale": "zh_CN"})},
    )
    lab.api("api/contents/work.ipynb", method="PUT", body={"type": "notebook", "content": NOTEBOOK})

    page.goto(f"{lab.url}/tree?token={lab.token}", timeout=60_000)
    item = page.locator(TOP_BAR)
    expect(item).to_be_visible(timeout=60_000)
    # Notebook 7 itself is in Chinese (its language pack)...
    expect(page.locator(".lm-MenuBar-content").first).to_contain_text("文件", timeout=30_000)
    # ... and so is the top-bar item: its budget, and its tooltip
    budget = item.locator(".jp-gpucost-topbar-budget")
    expect(budget).to_contain_text("后在", timeout=30_000)
    expect(item).to_have_attribute("title", _contains("点击"), timeout=30_000)
    expect(item).not_to_contain_text("budget")
    screenshot(page, "zh-notebook7-tree.png")

    item.click()
    panel = page.locator("#jp-gpucost-panel-widget")
    expect(panel).to_be_visible(timeout=30_000)
    for label in ("本次会话", "今天", "本月", "当前费率", "内核", "价格"):
        expect(panel).to_contain_text(label, timeout=30_000)
    for english in ("This session", "Rate now", "Kernels", "Prices"):
        expect(panel).not_to_contain_text(english)
    screenshot(page, "zh-notebook7-panel.png")

    page.goto(f"{lab.url}/notebooks/work.ipynb?token={lab.token}", timeout=60_000)
    item = page.locator(TOP_BAR)
    expect(item).to_be_visible(timeout=60_000)
    expect(item.locator(".jp-gpucost-topbar-budget")).to_contain_text("后在", timeout=30_000)
    expect(item).not_to_contain_text("budget")
    screenshot(page, "zh-notebook7-notebook.png")


def test_the_last_budget_action_reads_in_chinese_at_the_browsers_local_time(
    lab_factory: Any, browser: Any, tmp_path: Path
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        "--GpuCost.budget_grace_s=1",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    lab.api(
        "lab/api/settings/@jupyterlab/translation-extension:plugin",
        method="PUT",
        body={"raw": json.dumps({"locale": "zh_CN"})},
    )
    # the server's language follows JupyterLab's from when JupyterLab loads it
    context = browser.new_context(
        viewport={"width": 1280, "height": 800}, timezone_id="Asia/Shanghai", locale="zh-CN"
    )
    page = context.new_page()
    try:
        page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
        page.locator(ITEM).wait_for(state="visible", timeout=60_000)
        expect(page.locator(".lm-MenuBar-content").first).to_contain_text("文件", timeout=30_000)
        # a budget of one micro-unit: spent at once, acted on a second later
        lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": 0.000001})
        wait_until(
            "the budget's action recorded",
            lambda: lab.api("gpucost/api/budget")["last_action"] is not None,  # type: ignore[index]
            60,
        )
        message = lab.api("gpucost/api/budget")["last_action"]["message"]  # type: ignore[index]
        # the server wrote it in Chinese, with its time as HH:MM UTC
        utc = re.search(r"\d{2}:\d{2} UTC", message)
        assert utc, message
        assert message.startswith("已于 "), message
        assert "预算用完而停止" in message
        page.locator(ITEM).click()
        last = page.locator(f"{PANEL} [data-field='last-action']")
        expect(last).to_contain_text("预算用完而停止", timeout=30_000)
        # ... and the panel writes that time in the browser's own time zone
        expect(last).not_to_contain_text(utc.group(0))
        screenshot(page, "zh-last-action.png")
    finally:
        context.close()


def _contains(text: str) -> Any:
    import re

    return re.compile(f".*{re.escape(text)}.*", re.S)
