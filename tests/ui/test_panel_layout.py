"""The panel's layout in Notebook 7's sidebar and JupyterLab, light and dark."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import screenshot

pytestmark = pytest.mark.browser

PANEL = "#jp-gpucost-panel"
TOP_BAR = ".jp-gpucost-TopBarItem"
STATUS_ITEM = "#jp-gpucost-status"


def luminance(css: str) -> float:
    """A computed colour's luminance (0 black, 1 white); a transparent one is not a
    colour of the theme: it fails."""
    values = [float(v) for v in re.findall(r"[\d.]+", css)]
    assert len(values) == 3 or (len(values) == 4 and values[3] > 0), f"no colour: {css}"
    r, g, b = values[:3]
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


@pytest.mark.parametrize(
    ("front_end", "theme"),
    [
        ("tree", "JupyterLab Light"),
        ("tree", "JupyterLab Dark"),
        ("lab", "JupyterLab Dark"),
    ],
)
def test_the_kernels_cost_is_seen_and_the_scope_follows_the_theme(
    lab_factory: Any, page: Any, tmp_path: Path, front_end: str, theme: str
) -> None:
    """Notebook 7 (``tree``: the panel in its right sidebar) and JupyterLab."""
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    lab.api(
        "lab/api/settings/@jupyterlab/apputils-extension:themes",
        method="PUT",
        body={"raw": f'{{"theme": "{theme}"}}'},
    )
    lab.api("api/kernels", method="POST", body={})
    page.goto(f"{lab.url}/{front_end}?token={lab.token}", timeout=60_000)
    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme, timeout=60_000)
    page.locator(TOP_BAR if front_end == "tree" else STATUS_ITEM).click(timeout=60_000)
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    cost = panel.locator("table.jp-gpucost-kernels th", has_text="Cost")
    expect(cost).to_have_count(1, timeout=30_000)
    expect(panel.locator("tr[data-kind='idle'] td").last).to_have_text(
        re.compile(r"^\$\d"), timeout=30_000
    )
    page.wait_for_timeout(500)
    screenshot(page, f"panel-{front_end}-{theme.split()[-1].lower()}.png")
    # the budget's scope picker is drawn in the theme's colours
    select = panel.locator(".jp-gpucost-budget-form select")
    expect(select).to_be_visible()
    # the options are what the browser's list shows when the picker opens
    option = select.locator("option").first
    background = option.evaluate("n => getComputedStyle(n).backgroundColor")
    colour = option.evaluate("n => getComputedStyle(n).color")
    if theme == "JupyterLab Dark":
        assert luminance(background) < 0.35, background
        assert luminance(colour) > 0.6, colour
    else:
        assert luminance(background) > 0.8, background
        assert luminance(colour) < 0.4, colour
    # the Cost column is on screen, inside the sidebar, without scrolling
    box = panel.bounding_box()
    header = cost.bounding_box()
    assert box
    assert header
    assert header["x"] + header["width"] <= box["x"] + box["width"] + 1, (box, header)
    idle = panel.locator("tr[data-kind='idle'] td").last.bounding_box()
    assert idle
    assert idle["x"] + idle["width"] <= box["x"] + box["width"] + 1, (box, idle)
    cost.scroll_into_view_if_needed()
    screenshot(page, f"panel-{front_end}-{theme.split()[-1].lower()}-kernels.png")
