"""One live cost, pushed by the server: Notebook 7's top bar, several tabs, a lost socket."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import screenshot, wait_until
from .test_budget import NOTEBOOK, TYPED, on_disk

pytestmark = pytest.mark.browser

TOP_BAR = ".jp-gpucost-TopBarItem"
STATUS_ITEM = "#jp-gpucost-status"
AMOUNT = re.compile(r"\$(\d+\.\d+)\s*·\s*\$(\d+\.\d+)/h")


def amount(item: Any) -> float:
    match = AMOUNT.search(item.inner_text().strip())
    assert match, item.inner_text()
    return float(match.group(1))


def simulated_lab(lab_factory: Any, *more: str) -> Any:
    return lab_factory("--GpuCost.telemetry=simulated", "--GpuCost.minimum_charge_s=0", *more)


def gpucost_requests(page: Any) -> list[str]:
    """Record every request the page makes to the extension's routes."""
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url) if "/gpucost/" in r.url else None)
    return urls


def test_notebook7_tree_and_notebook_show_the_live_cost_in_the_top_bar(
    lab_factory: Any, page: Any
) -> None:
    lab = simulated_lab(lab_factory)
    lab.api("api/contents/work.ipynb", method="PUT", body={"type": "notebook", "content": NOTEBOOK})

    page.goto(f"{lab.url}/tree?token={lab.token}", timeout=60_000)
    item = page.locator(TOP_BAR)
    expect(item).to_be_visible(timeout=60_000)
    expect(item).to_contain_text(AMOUNT, timeout=30_000)
    expect(item).to_contain_text("$6.86/h")
    expect(item).to_contain_text("simulated")
    expect(item).to_have_attribute("data-state", "simulated")
    first = amount(item)
    page.wait_for_timeout(3_000)
    assert amount(item) > first
    # Notebook 7 has no status bar: no status item anywhere
    assert page.locator(STATUS_ITEM).count() == 0
    screenshot(page, "notebook7-tree.png")

    # a click opens the cost panel in the right sidebar
    item.click()
    panel = page.locator("#jp-gpucost-panel-widget")
    expect(panel).to_be_visible(timeout=30_000)
    expect(panel).to_contain_text("A100-80GB", timeout=30_000)
    expect(panel).to_contain_text("Simulated")
    screenshot(page, "notebook7-tree-panel.png")

    page.goto(f"{lab.url}/notebooks/work.ipynb?token={lab.token}", timeout=60_000)
    item = page.locator(TOP_BAR)
    expect(item).to_be_visible(timeout=60_000)
    expect(item).to_contain_text(AMOUNT, timeout=30_000)
    first = amount(item)
    page.wait_for_timeout(3_000)
    assert amount(item) > first
    screenshot(page, "notebook7-notebook.png")


def test_notebook7_budget_countdown_save_and_stop_now_saves_the_typed_text(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    lab = simulated_lab(
        lab_factory,
        "--GpuCost.budget_grace_s=120",
        f"--GpuCost.budget_state_path={tmp_path / 'budget.json'}",
    )
    lab.api(
        "lab/api/settings/@jupyterlab/docmanager-extension:plugin",
        method="PUT",
        body={"raw": '{"autosave": false}'},
    )
    lab.api("api/contents/work.ipynb", method="PUT", body={"type": "notebook", "content": NOTEBOOK})
    page.goto(f"{lab.url}/notebooks/work.ipynb?token={lab.token}", timeout=60_000)
    editor = page.locator(".jp-Notebook .jp-Cell .cm-content").first
    editor.wait_for(state="visible", timeout=60_000)
    wait_until("the notebook's kernel to start", lambda: len(lab.api("api/kernels")) == 1, 60)
    editor.click()
    page.keyboard.type(TYPED)
    expect(editor).to_contain_text("4242")
    assert "4242" not in on_disk(lab)

    spent = lab.api("gpucost/api/status")["cost_usd"]  # type: ignore[index]
    lab.api("gpucost/api/budget", method="PUT", body={"amount_usd": round(spent + 0.006, 6)})
    item = page.locator(TOP_BAR)
    # the top bar says the budget, then the countdown with its buttons
    expect(item.locator(".jp-gpucost-topbar-budget")).to_contain_text("budget", timeout=30_000)
    countdown = page.get_by_text(re.compile(r"Your budget is spent\. .* in \d:\d\d"))
    expect(countdown).to_be_visible(timeout=30_000)
    expect(item).to_contain_text("stop in", timeout=10_000)
    stop = page.get_by_role("button", name="Save and stop now")
    expect(stop).to_be_visible()
    screenshot(page, "notebook7-countdown.png")
    stop.click()
    wait_until("the typed text on disk", lambda: "4242" in on_disk(lab), 60)
    wait_until("the kernel shut down", lambda: lab.api("api/kernels") == [], 60)
    assert TYPED in on_disk(lab)
    last = lab.api("gpucost/api/budget")["last_action"]  # type: ignore[index]
    assert last["notebooks_saved"] == 1


@pytest.mark.parametrize("front_end", ["lab", "tree"])
def test_three_tabs_make_no_requests_in_steady_state_and_still_rise(
    lab_factory: Any, browser: Any, front_end: str
) -> None:
    lab = simulated_lab(lab_factory)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        pages, counts = [], []
        selector = STATUS_ITEM if front_end == "lab" else TOP_BAR
        for _ in range(3):
            page = context.new_page()
            counts.append(gpucost_requests(page))
            page.goto(f"{lab.url}/{front_end}?token={lab.token}", timeout=60_000)
            expect(page.locator(selector)).to_contain_text(AMOUNT, timeout=60_000)
            pages.append(page)
        # loaded: from now on the cost comes pushed on the event socket
        page.wait_for_timeout(2_000)
        before = [amount(p.locator(selector)) for p in pages]
        at_start = [len(c) for c in counts]
        pages[0].wait_for_timeout(12_000)
        after = [amount(p.locator(selector)) for p in pages]
        made = [len(c) - n for c, n in zip(counts, at_start, strict=True)]
        assert made == [0, 0, 0], [c[n:] for c, n in zip(counts, at_start, strict=True)]
        assert all(a > b for a, b in zip(after, before, strict=True)), (before, after)
        assert all(p.locator(selector).get_attribute("data-state") == "simulated" for p in pages)
    finally:
        context.close()


def test_with_the_event_socket_blocked_the_cost_still_rises_by_polling(
    lab_factory: Any, page: Any
) -> None:
    lab = simulated_lab(lab_factory)
    # the event socket never reaches the server: it is closed at once
    page.route_web_socket(re.compile(r".*/api/events/subscribe.*"), lambda ws: ws.close())
    urls = gpucost_requests(page)
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    item = page.locator(STATUS_ITEM)
    expect(item).to_contain_text(AMOUNT, timeout=60_000)
    # no push arrives: after the heartbeat the page polls the status
    # (request events are delivered while Playwright waits, not during time.sleep)
    for _ in range(80):
        if sum("/gpucost/api/status" in u for u in urls) >= 3:
            break
        page.wait_for_timeout(500)
    assert sum("/gpucost/api/status" in u for u in urls) >= 3, urls
    first = amount(item)
    page.wait_for_timeout(4_000)
    assert amount(item) > first
    # nothing false: not stale, no error, still the simulated figures
    expect(item).to_have_attribute("data-state", "simulated")
    assert "stale" not in item.inner_text()
    assert "Stale" not in (item.get_attribute("title") or "")
    status = lab.api("gpucost/api/status")
    assert status["cost_usd"] >= amount(item)  # type: ignore[index]
    screenshot(page, "lab-polling-fallback.png")


def test_jupyterlab_top_bar_item_is_a_setting(lab_factory: Any, page: Any) -> None:
    lab = simulated_lab(lab_factory)
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    expect(page.locator(STATUS_ITEM)).to_contain_text(AMOUNT, timeout=60_000)
    assert not page.locator(TOP_BAR).is_visible()
    lab.api(
        "lab/api/settings/jupyter-gpucost:top-bar",
        method="PUT",
        body={"raw": '{"showInJupyterLab": true}'},
    )
    page.reload()
    expect(page.locator(TOP_BAR)).to_contain_text(AMOUNT, timeout=60_000)
    screenshot(page, "lab-top-bar.png")


def test_notebook7_per_cell_badges(lab_factory: Any, page: Any) -> None:
    from .test_cells import BADGE, assert_money_rule, code_cell

    lab = simulated_lab(lab_factory)
    notebook = {
        **NOTEBOOK,
        "cells": [
            code_cell("sleepy", "import time\ntime.sleep(0.5)\nprint('done')"),
            code_cell("trivial", "1 + 1"),
        ],
    }
    lab.api(
        "api/contents/cells.ipynb", method="PUT", body={"type": "notebook", "content": notebook}
    )
    page.goto(f"{lab.url}/notebooks/cells.ipynb?token={lab.token}", timeout=60_000)
    cell = page.locator(".jp-Notebook .jp-Cell").first
    cell.wait_for(state="visible", timeout=60_000)
    wait_until("the notebook's kernel to start", lambda: len(lab.api("api/kernels")) == 1, 60)
    toggle = page.locator(".jp-gpucost-cell-toggle button, button.jp-gpucost-cell-toggle").first
    expect(toggle).to_be_visible(timeout=30_000)
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true", timeout=30_000)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    expect(cell.locator(".jp-OutputArea-output:not(.jp-gpucost-record)")).to_contain_text(
        "done", timeout=60_000
    )
    badge = cell.locator(".jp-gpucost-cell-badge")
    expect(badge).to_have_text(re.compile(r"^\$0\.\d{4} · \d+\.\d+ s$"), timeout=30_000)
    cost, seconds = (float(x) for x in re.findall(r"[\d.]+", badge.inner_text()))
    assert seconds >= 0.5
    assert cost == pytest.approx(seconds * 6.862 / 3600, abs=0.0001)
    # a trivial cell: its few milliseconds cost less than the smallest amount shown
    page.keyboard.press("Shift+Enter")  # the trivial cell (now selected)
    trivial = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-gpucost-cell-badge")
    expect(trivial).to_have_text(BADGE, timeout=30_000)
    assert_money_rule(trivial.inner_text())
    screenshot(page, "notebook7-cell-badge.png")

    # Notebook 7 saves the cost in the cell's metadata, and shows it as recorded after a
    # reload
    page.keyboard.press("Control+s")
    wait_until(
        "the cost saved in the notebook",
        lambda: "gpucost" in lab.api("api/contents/cells.ipynb")["content"]["cells"][0]["metadata"],  # type: ignore[index]
        30,
    )
    saved = lab.api("api/contents/cells.ipynb")["content"]["cells"][0]["metadata"]["gpucost"]  # type: ignore[index]
    # the badge's amount, to its four decimals
    assert abs(saved["cost_micro_usd"] / 1e6 - cost) <= 0.00005
    page.goto(f"{lab.url}/notebooks/cells.ipynb?token={lab.token}", timeout=60_000)
    recorded = page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-gpucost-cell-badge")
    expect(recorded).to_have_attribute("data-recorded", "true", timeout=60_000)
    expect(recorded).to_contain_text("recorded")
