"""One meaning per number, in a real JupyterLab and Notebook 7: the kernel's GPU use and the
machine's cost while its cells ran stand side by side, named for what they measure, and the
rows of no notebook are explained in a line."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import open_notebook, screenshot, wait_until
from .test_cells import code_cell
from .test_panel import PANEL

pytestmark = pytest.mark.browser

TOP_BAR = ".jp-gpucost-TopBarItem"
AMOUNT = re.compile(r"^(\$\d+\.\d+|< \$0\.0001)$")


NOTEBOOK = {
    "cells": [
        code_cell("load", "%load_ext jupyter_gpucost"),
        # a cell that waits: the machine's cost for 1.5 s, and no GPU use
        code_cell("wait", "%%gpucost\nimport time\ntime.sleep(1.5)\nprint('slept')"),
    ],
    "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}


def kernel_with_cells(lab: Any) -> dict[str, Any] | None:
    answer: Any = lab.api("gpucost/api/kernels")
    for kernel in answer.get("kernels", []):
        if kernel.get("notebook_path") == "train.ipynb" and kernel.get("cells", 0) > 0:
            return dict(kernel)
    return None


def test_the_kernel_table_names_both_measures_in_jupyterlab_and_notebook7(
    lab_factory: Any, page: Any
) -> None:
    lab = lab_factory("--GpuCost.telemetry=simulated", "--GpuCost.minimum_charge_s=0")
    lab.api(
        "api/contents/train.ipynb", method="PUT", body={"type": "notebook", "content": NOTEBOOK}
    )
    cells = open_notebook(page, lab, "train.ipynb")
    cells.first.locator(".jp-InputArea-editor").click()  # type: ignore[attr-defined]
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    expect(cells.nth(1).locator(".jp-OutputArea-output").first).to_contain_text(  # type: ignore[attr-defined]
        "slept", timeout=60_000
    )
    wait_until("the cell's record", lambda: kernel_with_cells(lab) is not None, 60)
    kernel = kernel_with_cells(lab)
    assert kernel is not None
    # a 1.5 s wait on 2 simulated A100s at $6.862/h: about $0.003 of machine
    assert kernel["cells_cost_usd"] >= 1.5 * 6.862 / 3600 - 0.0001

    page.locator("#jp-gpucost-status").click()
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    table = panel.locator("table.jp-gpucost-kernels")
    for header in ("GPU use", "Machine while cells ran"):
        expect(table.locator("th", has_text=header)).to_have_count(1, timeout=30_000)
    row = table.locator(f"tr[data-kernel-id='{kernel['id']}']")
    expect(row).to_contain_text("train.ipynb")
    figures = row.locator("td.jp-gpucost-num")
    expect(figures).to_have_count(2)
    expect(figures.nth(0)).to_have_text(AMOUNT)
    expect(figures.nth(1)).to_have_text(AMOUNT)
    # the machine while its cells ran is the sum of its recent cells: the same figure
    shown = float(figures.nth(0).inner_text().lstrip("$"))
    assert shown == pytest.approx(kernel["cells_cost_usd"], abs=0.0001)
    note = panel.locator("[data-state='measures']")
    expect(note).to_contain_text("They measure different things and do not add up.")
    expect(note).to_contain_text("Rows of no notebook")
    expect(
        panel.locator("table.jp-gpucost-cells th", has_text="Machine while it ran")
    ).to_have_count(1)
    table.scroll_into_view_if_needed()
    screenshot(page, "measures-jupyterlab.png")

    page.set_viewport_size({"width": 1000, "height": 800})
    page.goto(f"{lab.url}/tree?token={lab.token}", timeout=60_000)
    item = page.locator(TOP_BAR)
    expect(item).to_be_visible(timeout=60_000)
    item.click()
    side = page.locator("#jp-gpucost-panel-widget")
    expect(side).to_be_visible(timeout=30_000)
    side_table = side.locator("table.jp-gpucost-kernels")
    expect(side_table.locator("th", has_text="Machine while cells ran")).to_have_count(
        1, timeout=30_000
    )
    expect(side.locator("[data-state='measures']")).to_contain_text("Rows of no notebook")
    side_table.scroll_into_view_if_needed()
    # in the narrow sidebar both of a kernel's figures stay on screen, side by side
    box = side.bounding_box()
    for header in ("Machine while cells ran", "GPU use"):
        shown = side_table.locator("th", has_text=header).bounding_box()
        assert box is not None
        assert shown is not None, header
        assert shown["x"] + shown["width"] <= box["x"] + box["width"] + 1, (header, box, shown)
    screenshot(page, "measures-notebook7.png")
