"""The panel's alerts, as a person uses them: see where alerts go, add their own target,
test it, and never see a URL's secret on the page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from alert_receivers import Http, wait_for
from playwright.sync_api import expect

from .test_panel import open_panel

pytestmark = pytest.mark.browser


def test_the_user_adds_and_tests_their_own_target(
    lab_factory: Any, page: Any, http_receiver: Http
) -> None:
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        "--GpuCost.notify=webhook://127.0.0.1:9/admin?token=admin-s3cret",
    )
    page.goto(f"{lab.url}/lab?token={lab.token}")
    panel = open_panel(page)
    alerts = panel.locator(".jp-gpucost-alerts")
    expect(alerts.locator("[data-field='admin-target']")).to_have_text(
        "webhook (set by your administrator)", timeout=30_000
    )
    mine = f"webhook://127.0.0.1:{http_receiver.port}/mine?key=my-s3cret"
    alerts.locator(".jp-gpucost-alerts-add input").fill(mine)
    alerts.get_by_role("button", name="Add").click()
    code = alerts.locator("[data-field='your-target'] code")
    expect(code).to_have_text(re.compile(r"^webhook://…#[0-9a-f]{6}$"), timeout=30_000)
    alerts.get_by_role("button", name="Test").click()
    expect(alerts).to_contain_text("Test alert sent", timeout=30_000)
    assert wait_for(lambda: len(http_receiver.at("/mine")) == 1, 30)
    (trial,) = http_receiver.at("/mine")
    assert trial["kind"] == "test"
    content = page.content()
    assert "my-s3cret" not in content
    assert "admin-s3cret" not in content
