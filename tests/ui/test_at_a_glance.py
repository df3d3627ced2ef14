"""What a careful user tripped on, seen in JupyterLab and Notebook 7, light and dark: each
front end × theme opens one page and looks at every defect shown there (the same figure
in different forms, field names leaking, misleading figures, the layout, a raised budget
that is still spent, and a change of language reaching the server without a reload).

The panel's layout (its Cost column in Notebook 7's sidebar, the themed scope picker) is
checked here too. The panel's requests in 30 s are counted in ``test_panel_push.py`` (they do not depend on
the theme); the cell badges of a running notebook in ``test_cells.py`` and
``test_live_cost.py``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Lab, screenshot, wait_until

pytestmark = pytest.mark.browser

PANEL = "#jp-gpucost-panel"
TOP_BAR = ".jp-gpucost-TopBarItem"
STATUS_ITEM = "#jp-gpucost-status"
BUDGET_ITEM = "#jp-gpucost-budget"
#: a recent cell that cost next to nothing, and one of last year
TINY_CELL = "3f2a9c1e-5b7d-4c1a-9e0f-1a2b3c4d5e6f"
OLD_CELL = "77bb01de-0c3e-4f5a-8b9c-0d1e2f3a4b5c"
#: a time of day written by the server's rule (24 h, `UTC`) instead of the browser's
SERVER_TIME = re.compile(r"\b\d{2}:\d{2} UTC\b")
#: a time of day not in the en-US browser's form (`9:30:00 AM`); `stop in 9:53` is a
#: countdown, not a time of day, and the panel does not show one
NOT_BROWSER_TIME = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?![:\d]| [AP]M)")
MONEY = re.compile(r"(?:< )?\$\d+\.\d+")


def luminance(css: str) -> float:
    """A computed colour's luminance (0 black, 1 white); a transparent one is not a
    colour of the theme: it fails."""
    values = [float(v) for v in re.findall(r"[\d.]+", css)]
    assert len(values) == 3 or (len(values) == 4 and values[3] > 0), f"no colour: {css}"
    r, g, b = values[:3]
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def post_cells(lab: Lab) -> None:
    """Two cells as a kernel records them: one just now that cost a hundredth of a cent
    and less, and one of June last year."""
    now = datetime.now(UTC)
    last_year = datetime(now.year - 1, 6, 1, 9, 30, tzinfo=UTC)
    for cell_id, ended, cost in ((TINY_CELL, now, 0.00001), (OLD_CELL, last_year, 0.25)):
        lab.api(
            "gpucost/api/cells",
            method="POST",
            body={
                "cell_id": cell_id,
                "notebook_path": "work.ipynb",
                "started": (ended - timedelta(seconds=2)).isoformat(),
                "ended": ended.isoformat(),
                "wall_s": 2.0,
                "cost_usd": cost,
            },
        )


@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark"])
@pytest.mark.parametrize("front_end", ["lab", "tree"])
def test_every_defect_a_user_saw_is_gone_in_both_front_ends_and_themes(
    lab_factory: Any, page: Any, tmp_path: Path, front_end: str, theme: str
) -> None:
    """``lab``: JupyterLab (the panel in the main area); ``tree``: Notebook 7 (the panel
    in its right sidebar)."""
    name = f"{front_end}-{theme.split()[-1].lower()}"
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        # the providers' 60 s minimum charge, and a countdown that outlasts the test
        "--GpuCost.minimum_charge_s=60",
        "--GpuCost.budget_grace_s=600",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    lab.api(
        "lab/api/settings/@jupyterlab/apputils-extension:themes",
        method="PUT",
        body={"raw": json.dumps({"theme": theme})},
    )
    lab.api("api/kernels", method="POST", body={})
    post_cells(lab)
    # a budget of five cents, spent at once by the minimum charge
    lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": 0.05})

    page.goto(f"{lab.url}/{front_end}?token={lab.token}", timeout=60_000)
    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme, timeout=60_000)
    item = page.locator(TOP_BAR if front_end == "tree" else STATUS_ITEM)
    item.click(timeout=60_000)
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    kernels = panel.locator("table.jp-gpucost-kernels")
    expect(kernels.locator("tr[data-kind='idle'] td").last).to_have_text(MONEY, timeout=30_000)
    cells = panel.locator("table.jp-gpucost-cells")
    expect(cells).to_contain_text("work.ipynb", timeout=30_000)
    page.wait_for_timeout(500)  # let the layout settle for the screenshot
    screenshot(page, f"glance-{name}.png")

    # -- layout: the GPU use column on screen, the budget's scope picker in the theme ----
    cost = kernels.locator("th", has_text="GPU use")
    expect(cost).to_have_count(1)
    box, header = panel.bounding_box(), cost.bounding_box()
    idle_cell = kernels.locator("tr[data-kind='idle'] td").last.bounding_box()
    assert box
    assert header
    assert idle_cell
    assert header["x"] + header["width"] <= box["x"] + box["width"] + 1, (box, header)
    assert idle_cell["x"] + idle_cell["width"] <= box["x"] + box["width"] + 1, (box, idle_cell)
    option = panel.locator(".jp-gpucost-budget-form select option").first
    background = option.evaluate("n => getComputedStyle(n).backgroundColor")
    colour = option.evaluate("n => getComputedStyle(n).color")
    if theme == "JupyterLab Dark":
        assert luminance(background) < 0.35, background
        assert luminance(colour) > 0.6, colour
    else:
        assert luminance(background) > 0.8, background
        assert luminance(colour) < 0.4, colour

    # a kernel's state is one word on one line, never cut in two (`starti|ng`)
    state_lines = (
        kernels.locator("tr[data-kind='kernel'] td")
        .nth(1)
        .evaluate(
            "n => { const r = document.createRange(); r.selectNodeContents(n);"
            " return r.getClientRects().length; }"
        )
    )
    assert state_lines == 1, state_lines
    cost.scroll_into_view_if_needed()
    screenshot(page, f"glance-{name}-kernels.png")

    # -- recent cells: named by notebook and cell, last year's with its year ---------
    tiny = cells.locator("tr", has_text=f"cell {TINY_CELL[:8]}")
    expect(tiny).to_contain_text(f"work.ipynb · cell {TINY_CELL[:8]}")
    expect(tiny.locator("td").last).to_have_text("< $0.0001")
    old = cells.locator("tr", has_text=f"cell {OLD_CELL[:8]}")
    expect(old).to_contain_text(str(datetime.now(UTC).year - 1))

    # -- figures that mislead ---------------------------------------------------------
    # no right-sizing advice seconds into the session, and the panel says why
    expect(panel.locator("[data-field='rightsizing']")).to_contain_text("Too early to tell")
    expect(panel).not_to_contain_text("would have cost")
    # the minimum charge is named as such, not as GPU use by no kernel
    expect(kernels.locator("tr[data-kind='minimum']")).to_contain_text("Minimum charge")
    # simulated telemetry: the note saying how its GPU use is attributed
    expect(panel.locator(".jp-gpucost-panel-note[data-state='note']")).to_contain_text(
        "Simulated telemetry"
    )

    # one idle figure: the kernels table and "Waste and advice" agree (both pushed: a
    # push may land between the two reads, so read them together until they agree)
    def idle_figures() -> list[str]:
        texts: list[str] = page.evaluate(
            """() => [
                document.querySelector("#jp-gpucost-panel tr[data-kind='idle'] td:last-child"),
                document.querySelector("#jp-gpucost-panel [data-field='idle']"),
            ].map(n => n ? n.textContent : '')"""
        )
        return [m.group(0) if (m := MONEY.search(t)) else t for t in texts]

    wait_until(f"one idle figure: {idle_figures()}", lambda: len(set(idle_figures())) == 1, 15)

    # -- the same figure in one form ----------------------------------------------------
    budget_title = (
        item.get_attribute("title")
        if front_end == "tree"
        else page.locator(BUDGET_ITEM).get_attribute("title")
    )
    assert budget_title
    assert "$0.05 per session" in budget_title, budget_title
    expect(panel.locator(".jp-gpucost-panel-budget")).to_contain_text("of $0.05 per session")
    seen = "\n".join([panel.inner_text(), item.inner_text(), str(budget_title)])
    assert "$0.0500" not in seen
    assert "$0.0000" not in seen
    assert "(s)" not in seen  # plurals through the translator: "1 notebook", not "notebook(s)"
    assert not SERVER_TIME.search(panel.inner_text())
    assert not NOT_BROWSER_TIME.findall(panel.inner_text()), NOT_BROWSER_TIME.findall(
        panel.inner_text()
    )

    # -- "Raise budget" to an amount still spent: said, and the countdown goes on -------
    spent = float(lab.api("gpucost/api/budget")["soft"]["spent_usd"])  # type: ignore[index]
    page.get_by_role("button", name="Raise budget").first.click(timeout=30_000)
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Raise your budget", timeout=10_000)
    assert float(dialog.locator("input").input_value()) > spent
    dialog.locator("input").fill("0.06")
    dialog.get_by_role("button", name=re.compile("^OK$", re.IGNORECASE)).click()
    warning = page.get_by_text(re.compile(r"Your new budget of \$0\.06 is already spent"))
    expect(warning.first).to_be_visible(timeout=15_000)
    expect(warning.first).to_contain_text("the countdown goes on")
    assert lab.api("gpucost/api/budget")["grace"] is not None  # type: ignore[index]
    screenshot(page, f"glance-{name}-raised.png")

    # -- the panel's budget form: the server's words, no field name; a micro-unit budget
    form = panel.locator(".jp-gpucost-budget-form")
    form.locator("input").fill("0")
    form.get_by_role("button", name="Set").click()
    error = panel.locator(".jp-gpucost-panel-budget [data-state='error']")
    expect(error).to_contain_text("must be more than 0", timeout=15_000)
    expect(error).not_to_contain_text("amount_usd")
    form.locator("input").fill("0.000001")
    form.get_by_role("button", name="Set").click()
    expect(panel.locator(".jp-gpucost-panel-budget")).to_contain_text(
        "of $0.000001 per session spent (>999%)", timeout=15_000
    )

    # -- JupyterLab's language changes elsewhere (another tab, the Settings Editor): the
    # server's words in this open page follow without a reload
    lab.api(
        "lab/api/settings/@jupyterlab/translation-extension:plugin",
        method="PUT",
        body={"raw": json.dumps({"locale": "zh_CN"})},
    )
    expect(panel.locator(".jp-gpucost-panel-note[data-state='note']")).to_contain_text(
        "模拟遥测", timeout=15_000
    )
    expect(panel.locator("[data-field='rightsizing']")).to_contain_text(
        "尚无法判断", timeout=15_000
    )
    screenshot(page, f"glance-{name}-language.png")
