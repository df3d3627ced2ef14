"""What a person sees in JupyterLab's status bar, in headless Chromium."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS, screenshot

pytestmark = pytest.mark.browser

ITEM = "#jp-gpucost-status"
AMOUNT = re.compile(r"\$(\d+\.\d+)\s*·\s*\$(\d+\.\d+)/h")


def open_lab(page: Any, lab: Any) -> Any:
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    item = page.locator(ITEM)
    item.wait_for(state="visible", timeout=60_000)
    return item


def wait_for_state(item: Any, state: str, text: str | re.Pattern[str]) -> None:
    """Wait until the item is in ``state`` and shows ``text``, as a person would see it."""
    expect(item).to_have_attribute("data-state", state, timeout=30_000)
    expect(item).to_contain_text(text, timeout=30_000)


def amount(item: Any) -> float:
    match = AMOUNT.match(item.inner_text().strip())
    assert match, item.inner_text()
    return float(match.group(1))


def test_status_bar_shows_a_rising_simulated_cost(lab_factory: Any, page: Any) -> None:
    lab = lab_factory("--GpuCost.telemetry=simulated", "--GpuCost.minimum_charge_s=0")
    item = open_lab(page, lab)
    wait_for_state(item, "simulated", AMOUNT)
    first = amount(item)
    text = item.inner_text()
    assert "$6.86/h" in text  # 2x A100-80GB at 3.431 $/h
    assert "simulated" in text
    title = item.get_attribute("title") or ""
    assert "This session has cost $" in title
    assert "2× A100-80GB" in title
    assert "aws on-demand" in title
    assert "2026-01-21" in title
    page.wait_for_timeout(4_000)
    second = amount(item)
    assert second > first, (first, second)
    # the figure agrees with the server's own, read after it: the bar shows it to four
    # decimals, rounded to the nearest, so the server's exact figure is at most half a
    # unit of the last decimal below it
    status = lab.api("gpucost/api/status")
    assert status["cost_usd"] >= second - 0.00005  # type: ignore[index]
    screenshot(page, "statusbar-simulated.png")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".jp-StatusBar-Widget").screenshot(path=str(ARTIFACTS / "statusbar.png"))


def test_no_gpu_telemetry_is_said_plainly(lab_factory: Any, page: Any) -> None:
    # no GPU metered: the GPU cost is unknown (a state with its reason), never a $ figure
    lab = lab_factory("--GpuCost.telemetry=none", "--GpuCost.base_price_usd_per_hour=0.5")
    item = open_lab(page, lab)
    wait_for_state(item, "unknown", "GPU cost unknown")
    text = item.inner_text()
    assert text == "GPU cost unknown ⚠"
    assert "turned off" in (item.get_attribute("title") or "")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".jp-StatusBar-Widget").screenshot(
        path=str(ARTIFACTS / "statusbar-no-telemetry.png")
    )


def test_a_gpu_with_no_price_shows_its_upper_bound_labelled(lab_factory: Any, page: Any) -> None:
    # the catalog has no AWS spot price for an A100-80GB (a spot instance's price is read
    # from its zone): its on-demand price, labelled
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.price_provider=aws",
        "--GpuCost.price_market=spot",
        "--GpuCost.price_region=us-east-1",
    )
    item = open_lab(page, lab)
    wait_for_state(item, "simulated", "≤ $")
    text = item.inner_text()
    assert "⚠" in text
    assert "≤ $" in text
    assert "$0.00" not in text
    title = item.get_attribute("title") or ""
    assert "Upper bound: spot: priced at on-demand, the most it can cost" in title
    assert "not counted" not in title
    status = lab.api("gpucost/api/status")
    assert status["price_basis"] == "upper-bound"  # type: ignore[index]
    # the panel says it where it shows the rate and the prices
    item.click()
    panel = page.locator("#jp-gpucost-panel")
    expect(panel).to_be_visible(timeout=30_000)
    rate = panel.locator("[data-total='rate'] .jp-gpucost-total-value")
    expect(rate).to_contain_text("≤ $", timeout=30_000)
    prices = panel.locator(".jp-gpucost-panel-prices")
    expect(prices).to_contain_text("(upper bound: spot: priced at on-demand, the most it can cost")
    screenshot(page, "upper-bound.png")


def test_missing_server_extension_is_said_plainly(lab_factory: Any, page: Any) -> None:
    lab = lab_factory("--ServerApp.jpserver_extensions={'jupyter_gpucost': False}")
    item = open_lab(page, lab)
    wait_for_state(item, "missing", "server extension not enabled")
    assert "server extension not enabled" in item.inner_text()


def count_status_requests(page: Any, seconds: float) -> int:
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url) if "gpucost/api/status" in r.url else None)
    page.wait_for_timeout(seconds * 1000)  # lets Playwright dispatch the request events
    return len(seen)


def test_poll_interval_comes_from_the_settings(lab_factory: Any, page: Any) -> None:
    """The setting is the interval of the poll the page falls back to while the server's
    event socket is down (with it up, the status is pushed: see test_live_cost.py)."""
    lab = lab_factory("--GpuCost.telemetry=simulated")
    page.route_web_socket(re.compile(r".*/api/events/subscribe.*"), lambda ws: ws.close())
    plugin = "lab/api/settings/jupyter-gpucost:plugin"
    lab.api(plugin, method="PUT", body={"raw": '{"pollIntervalSeconds": 1}'})
    open_lab(page, lab)
    page.wait_for_timeout(12_000)  # no push in the heartbeat: the fallback poll starts
    fast = count_status_requests(page, 6)
    lab.api(plugin, method="PUT", body={"raw": '{"pollIntervalSeconds": 30}'})
    page.reload()
    page.locator(ITEM).wait_for(state="visible", timeout=60_000)
    page.wait_for_timeout(12_000)
    slow = count_status_requests(page, 6)
    assert fast >= 4, fast
    assert slow <= 2, slow


def count_kernels_requests(page: Any, seconds: float) -> int:
    seen: list[str] = []
    pattern = re.compile(r"gpucost/api/kernels(\?|$)")
    page.on("request", lambda r: seen.append(r.url) if pattern.search(r.url) else None)
    page.wait_for_timeout(seconds * 1000)  # lets Playwright dispatch the request events
    return len(seen)


def test_the_panel_polls_at_the_one_fallback_interval(lab_factory: Any, page: Any) -> None:
    """The open panel falls back to polling at the status bar's interval (the one setting),
    unless the deprecated panel setting is set."""
    lab = lab_factory("--GpuCost.telemetry=simulated")
    page.route_web_socket(re.compile(r".*/api/events/subscribe.*"), lambda ws: ws.close())
    plugin = "lab/api/settings/jupyter-gpucost:plugin"
    panel_plugin = "lab/api/settings/jupyter-gpucost:panel"

    def panel_requests() -> int:
        item = page.locator(ITEM)
        item.wait_for(state="visible", timeout=60_000)
        item.click()
        expect(page.locator("#jp-gpucost-panel")).to_be_visible(timeout=30_000)
        page.wait_for_timeout(12_000)  # no push in the heartbeat: the fallback poll runs
        return count_kernels_requests(page, 6)

    lab.api(plugin, method="PUT", body={"raw": '{"pollIntervalSeconds": 30}'})
    open_lab(page, lab)
    slow = panel_requests()
    lab.api(plugin, method="PUT", body={"raw": '{"pollIntervalSeconds": 1}'})
    page.reload()
    fast = panel_requests()
    # the deprecated panel setting, set, overrides the one interval for the panel
    lab.api(panel_plugin, method="PUT", body={"raw": '{"pollIntervalSeconds": 30}'})
    page.reload()
    overridden = panel_requests()
    assert slow <= 2, slow
    assert fast >= 4, fast
    assert overridden <= 2, overridden
