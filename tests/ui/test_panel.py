"""The cost panel, as a person uses it: open it, run a cell, see where the money went."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_gpucost.core.catalog import load_catalog

from .conftest import open_notebook, screenshot

pytestmark = pytest.mark.browser

PANEL = "#jp-gpucost-panel"
# an amount by the money rule: `$0.0042`, `$2.51`, or `< $0.0001` (never `$0.0000`)
MONEY = re.compile(r"^(\$\d+\.\d+|< \$0\.0001)$")

NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "id": "sum-cell",
            "source": "total = sum(range(10))\ntotal",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
        }
    ],
    "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}


def run_first_cell(page: Any, lab: Any, path: str) -> None:
    cell = open_notebook(page, lab, path).first  # type: ignore[attr-defined]
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    expect(cell.locator(".jp-OutputArea-output")).to_contain_text("45", timeout=60_000)


def open_panel(page: Any) -> Any:
    page.locator("#jp-gpucost-status").click()
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    return panel


def test_panel_shows_totals_chart_and_the_kernel_that_ran(lab_factory: Any, page: Any) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        "--LabApp.expose_app_in_browser=True",
    )
    lab.api(
        "api/contents/train.ipynb", method="PUT", body={"type": "notebook", "content": NOTEBOOK}
    )
    run_first_cell(page, lab, "train.ipynb")

    panel = open_panel(page)
    total = panel.locator("[data-total='session'] .jp-gpucost-total-value")
    expect(total).to_have_text(MONEY, timeout=30_000)
    # the ledger's totals are known on a fresh server (today includes this session)
    expect(panel.locator("[data-total='today'] .jp-gpucost-total-value")).to_have_text(
        MONEY, timeout=30_000
    )
    expect(panel.locator("[data-total='rate'] .jp-gpucost-total-value")).to_have_text("$6.86/h")
    expect(panel).to_contain_text("Simulated")

    # the chart draws the spend rate and both GPUs' utilisation once there are two samples
    rate = panel.locator("path[data-series='rate']")
    expect(rate).to_have_attribute("d", re.compile(r"^M[\d.]+,[\d.]+L"), timeout=30_000)
    expect(panel.locator("path[data-series^='gpu-']")).to_have_count(2)

    # the notebook's kernel is in the table, with its state, uptime and a cost
    sessions = lab.api("api/sessions")
    (session,) = [s for s in sessions if s["path"] == "train.ipynb"]  # type: ignore[union-attr]
    kernel_id = session["kernel"]["id"]
    row = panel.locator(f"tr[data-kernel-id='{kernel_id}']")
    expect(row).to_contain_text("train.ipynb", timeout=30_000)
    expect(row.locator("td").nth(1)).to_have_text(re.compile(r"^(idle|busy)$"))
    # uptime in the one duration format (`42 s`, `5 min 03 s`)
    expect(row.locator("td").nth(2)).to_have_text(re.compile(r"^\d+ (s|min \d\d s)$"))
    # its share, and how the share was made (the recorded trace has memory, no samples)
    expect(row.locator("td").nth(3)).to_have_text("GPU 0 100% (by memory)", timeout=30_000)
    expect(row.locator("td").nth(4)).to_have_text(MONEY)
    # the table adds up to the server's total
    kernels = lab.api("gpucost/api/kernels")
    assert any(k["id"] == kernel_id for k in kernels["kernels"])  # type: ignore[index]
    expect(panel.locator("tr[data-kind='idle'] td").nth(4)).to_have_text(MONEY)
    expect(panel.locator("[data-field='rightsizing']")).not_to_be_empty()
    expect(panel).to_contain_text(f"catalog of {load_catalog().catalog_date}")
    screenshot(page, "panel-light.png")

    light = panel.evaluate("node => getComputedStyle(node).backgroundColor")
    page.evaluate(
        "window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})"
    )
    expect(page.locator("body")).to_have_attribute(
        "data-jp-theme-name", "JupyterLab Dark", timeout=30_000
    )
    page.wait_for_timeout(1_000)
    dark = panel.evaluate("node => getComputedStyle(node).backgroundColor")
    assert dark != light, (light, dark)
    expect(row).to_be_visible()
    screenshot(page, "panel-dark.png")


def test_palette_command_opens_the_panel(lab_factory: Any, page: Any) -> None:
    lab = lab_factory("--GpuCost.telemetry=none")
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    page.locator("#jp-gpucost-status").wait_for(state="visible", timeout=60_000)
    # keyboard shortcuts work once JupyterLab has started (its splash screen is gone)
    page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=60_000)
    page.keyboard.press("Control+Shift+c")
    palette = page.locator(".lm-CommandPalette-input")
    expect(palette).to_be_visible(timeout=10_000)
    palette.fill("GPU Cost")
    page.locator(".lm-CommandPalette-item", has_text="GPU Cost").first.click()
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    # no GPU telemetry: the cost is unknown, said so with the reason, never $0
    expect(panel.locator("[data-state='cost-unknown']")).to_contain_text("turned off")
    expect(panel.locator("[data-total='session'] .jp-gpucost-total-value")).to_have_text(
        "unknown ⚠"
    )


def test_panel_is_usable_in_a_narrow_window(lab_factory: Any, page: Any, tmp_path: Any) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.minimum_charge_s=0",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    lab.api(
        "api/contents/train.ipynb", method="PUT", body={"type": "notebook", "content": NOTEBOOK}
    )
    # a budget of one's own: the form then has its Remove button
    lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": 1000, "scope": "session"})
    page.set_viewport_size({"width": 700, "height": 800})
    run_first_cell(page, lab, "train.ipynb")
    panel = open_panel(page)
    expect(panel.locator("path[data-series='rate']")).to_have_attribute(
        "d", re.compile(r"^M[\d.]+,[\d.]+L"), timeout=30_000
    )
    remove = panel.get_by_role("button", name="Remove")
    expect(remove).to_be_visible(timeout=30_000)
    expect(panel.locator("table.jp-gpucost-kernels th", has_text="GPU use")).to_have_count(1)

    def check(width: int) -> None:
        box = panel.bounding_box()
        # nothing is cut off: the panel itself never needs to scroll sideways
        overflow = panel.evaluate("node => node.scrollWidth - node.clientWidth")
        assert overflow <= 1, (width, box, overflow)
        # the Remove button is inside the panel
        button = remove.bounding_box()
        assert button["x"] >= box["x"] - 1, (width, box, button)
        assert button["x"] + button["width"] <= box["x"] + box["width"] + 1, (width, box, button)
        # the kernels' GPU use column can be reached: the table scrolls in its own box
        cost = panel.locator("table.jp-gpucost-kernels th", has_text="GPU use")
        cost.scroll_into_view_if_needed()
        header = cost.bounding_box()
        assert header["x"] + header["width"] <= box["x"] + box["width"] + 1, (width, header)
        # the chart's labels are drawn at their font size, not squeezed with the drawing
        scales = panel.locator(".jp-gpucost-chart svg text").evaluate_all(
            "nodes => nodes.map(n => [n.getBoundingClientRect().width / n.getBBox().width,"
            " n.getBoundingClientRect().height / n.getBBox().height])"
        )
        assert scales, width
        for sx, sy in scales:
            assert 0.95 <= sx <= 1.05, (width, scales)
            assert 0.95 <= sy <= 1.05, (width, scales)

    check(700)
    screenshot(page, "panel-narrow-700.png")
    # the left sidebar open: the panel is about 300 px wide
    page.set_viewport_size({"width": 640, "height": 800})
    page.wait_for_timeout(500)
    assert (panel.bounding_box() or {}).get("width", 0) < 420
    check(640)
    screenshot(page, "panel-narrow-640.png")
