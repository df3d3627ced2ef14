"""A session priced in yuan shows yuan everywhere, exactly, in headless Chromium."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_gpucost.core.money import status_bar

from .conftest import screenshot

pytestmark = pytest.mark.browser

ITEM = "#jp-gpucost-status"
PANEL = "#jp-gpucost-panel"


def test_autodl_prices_show_yuan_in_the_status_bar_and_the_panel(
    lab_factory: Any, page: Any
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.price_provider=autodl",
        "--GpuCost.minimum_charge_s=0",
    )
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    item = page.locator(ITEM)
    # 2x A100-80GB at 7.98 CNY/h each
    expect(item).to_contain_text("CN¥15.96/h", timeout=60_000)
    text = item.inner_text()
    assert "$" not in text
    title = item.get_attribute("title") or ""
    assert "CN¥" in title
    assert "$" not in title
    assert "USD" not in title
    assert "autodl" in title
    item.click()
    panel = page.locator(PANEL)
    expect(panel).to_be_visible(timeout=30_000)
    rate = panel.locator("[data-total='rate'] .jp-gpucost-total-value")
    expect(rate).to_have_text("CN¥15.96/h", timeout=30_000)
    expect(panel.locator("[data-total='session'] .jp-gpucost-total-value")).to_contain_text("CN¥")
    # the figures agree with the server's, to the rule both sides follow
    status: Any = lab.api("gpucost/api/status")
    assert status["currency"] == "CNY"
    assert status_bar(Decimal("15.96"), "CN¥") + "/h" == rate.inner_text()
    panel_text = panel.inner_text()
    assert "CN¥" in panel_text
    assert "$" not in panel_text, panel_text
    assert "USD" not in panel_text, panel_text
    screenshot(page, "panel-autodl-yuan.png")
