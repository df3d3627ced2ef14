"""The open cost panel is pushed, not polled: requests counted in a real browser."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import expect

from .test_panel import NOTEBOOK, PANEL, open_panel, run_first_cell

pytestmark = pytest.mark.browser

GPUCOST = re.compile(r"/gpucost/api/")


def test_the_open_panel_makes_at_most_3_requests_in_30_s_and_follows_the_pushes(
    lab_factory: Any, page: Any
) -> None:
    lab = lab_factory("--GpuCost.telemetry=simulated", "--GpuCost.minimum_charge_s=0")
    lab.api(
        "api/contents/train.ipynb", method="PUT", body={"type": "notebook", "content": NOTEBOOK}
    )
    run_first_cell(page, lab, "train.ipynb")
    # loaded: the status and the panel's parts come pushed on the event socket
    page.wait_for_timeout(2_000)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if GPUCOST.search(r.url) else None)
    started = time.monotonic()
    panel = open_panel(page)
    sessions = lab.api("api/sessions")
    (session,) = [s for s in sessions if s["path"] == "train.ipynb"]  # type: ignore[union-attr]
    row = panel.locator(f"tr[data-kernel-id='{session['kernel']['id']}']")
    expect(row).to_contain_text("train.ipynb", timeout=30_000)
    rate = panel.locator("path[data-series='rate']")
    expect(rate).to_have_attribute("d", re.compile(r"^M[\d.]+,[\d.]+L"), timeout=30_000)

    # the kernel's uptime and the chart move on while the panel is open, by pushes
    uptime = row.locator("td").nth(2).inner_text()
    drawn = rate.get_attribute("d")
    page.wait_for_timeout(max(0.0, 30 - (time.monotonic() - started)) * 1000)
    assert row.locator("td").nth(2).inner_text() != uptime
    assert rate.get_attribute("d") != drawn
    assert len(requests) <= 3, requests

    # hidden (another tab in front): no request at all
    page.locator(".jp-DirListing-item", has_text="train.ipynb").first.dblclick()
    expect(page.locator(PANEL)).to_be_hidden(timeout=10_000)
    requests.clear()
    page.wait_for_timeout(10_000)
    assert requests == [], requests


def test_in_notebook_7s_sidebar_the_open_panel_is_pushed_too(lab_factory: Any, page: Any) -> None:
    lab = lab_factory("--GpuCost.telemetry=simulated", "--GpuCost.minimum_charge_s=0")
    kernel = lab.api("api/kernels", method="POST", body={})
    page.goto(f"{lab.url}/tree?token={lab.token}", timeout=60_000)
    top_bar = page.locator(".jp-gpucost-TopBarItem")
    expect(top_bar).to_contain_text("$", timeout=60_000)
    page.wait_for_timeout(2_000)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if GPUCOST.search(r.url) else None)
    started = time.monotonic()
    top_bar.click()
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    row = panel.locator(f"tr[data-kernel-id='{kernel['id']}']")  # type: ignore[index]
    expect(row).to_be_visible(timeout=30_000)
    uptime = row.locator("td").nth(2).inner_text()
    page.wait_for_timeout(max(0.0, 30 - (time.monotonic() - started)) * 1000)
    assert row.locator("td").nth(2).inner_text() != uptime
    assert len(requests) <= 3, requests
