"""The Hub's spawn page in Chromium, through a real JupyterHub and its proxy: beside each
profile, its price and what is left of the user's GPU-hour allowance at its rate; a profile
that cannot run the admin's minimum with what is left is refused, saying how much is left
and when it fills up; a spent allowance refuses every profile.

ann has 1 GPU-hour a week: 1 h on the T4 profile, 30 min on the 2 × A100 profile, and the
admin asks for 45 minutes at least. dave's allowance is 0.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from hub_service_fixture import Hub, chp_command, running_hub
from playwright.sync_api import expect

from .conftest import screenshot
from .test_hub_pages import login

pytestmark = pytest.mark.browser

HUB_EXTRA = """
from jupyter_gpucost.hub.spawn_form import priced_options_form

_gpucost = [s for s in c.JupyterHub.services if s["name"] == "gpucost"][0]
c.Spawner.options_form = priced_options_form(
    _gpucost["url"] + "/services/gpucost/",
    _gpucost["api_token"],
    [("t4", "T4"), ("a100", "2 × A100 80 GB")],
)
c.Spawner.options_from_form = "simple"
"""

SERVICE_EXTRA = """
c.GpuCostHub.profile_gpus = {"t4": "T4", "a100": "A100-80GB x 2"}
c.GpuCostHub.user_allowances = {
    "ann": {"gpu_hours": 1, "per": "week"},
    "dave": {"gpu_hours": 0, "per": "week"},
}
c.GpuCostHub.allowance_min_runtime_s = 2700
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    if chp_command() is None:
        pytest.fail("configurable-http-proxy not found: `npm install configurable-http-proxy`")
    root = tmp_path_factory.mktemp("hub-allowance-page")
    with running_hub(
        root,
        budgets={},
        proxy=True,
        users=("ann", "dave"),
        groups={},
        group_budgets={},
        service_extra=SERVICE_EXTRA,
        hub_extra=HUB_EXTRA,
    ) as hub:
        # the Hub adds its proxy routes after it answers its API: wait for the login page
        hub.wait("the proxy to route the Hub", lambda: _answers(f"{hub.public}/hub/login"), 60)
        yield hub


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def test_each_profile_says_its_price_and_the_time_left_at_its_rate(hub: Hub, page: Any) -> None:
    login(page, hub, "ann")
    page.goto(f"{hub.public}/hub/spawn", timeout=60_000)
    t4 = page.locator(".gpucost-profile[data-profile='t4']")
    a100 = page.locator(".gpucost-profile[data-profile='a100']")
    expect(t4).to_have_text(re.compile(r"^T4 — \$\d+\.\d\d/h — 1 h 0 min left this week$"))
    expect(a100).to_have_text(
        re.compile(r"^2 × A100 80 GB — \$\d+\.\d\d/h — 30 min left this week$")
    )
    screenshot(page, "hub-spawn-allowance.png")
    # the A100s cannot run the admin's 45 minutes with what is left: refused, with why
    page.check("input[name='profile'][value='a100']")
    page.click("#spawn_form input[type='submit'], #spawn_form button[type='submit']")
    message = page.locator("text=Your server cannot start:")
    expect(message).to_be_visible(timeout=30_000)
    expect(message).to_contain_text(
        "what is left lasts 30 min at this profile's rate, and the hub asks for at least 45 min"
    )
    expect(message).to_contain_text("has 1 GPU-hour left this week")
    expect(message).to_contain_text("It fills up again on Mon ")
    screenshot(page, "hub-spawn-allowance-refused.png")
    assert hub.server("ann") is None


def test_a_spent_allowance_refuses_every_profile_and_says_when_it_fills(
    hub: Hub, page: Any
) -> None:
    login(page, hub, "dave")
    page.goto(f"{hub.public}/hub/spawn", timeout=60_000)
    expect(page.locator(".gpucost-profile[data-profile='t4']")).to_contain_text(
        "0 s left this week"
    )
    page.click("#spawn_form input[type='submit'], #spawn_form button[type='submit']")
    message = page.locator("text=Your server cannot start:")
    expect(message).to_be_visible(timeout=30_000)
    expect(message).to_contain_text("the allowance is spent")
    expect(message).to_contain_text("It fills up again on Mon ")
    assert hub.server("dave") is None


def test_the_lines_are_in_the_browsers_language(hub: Hub, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="zh-CN")
    try:
        page = context.new_page()
        login(page, hub, "ann")
        page.goto(f"{hub.public}/hub/spawn", timeout=60_000)
        expect(page.locator(".gpucost-profile[data-profile='t4']")).to_have_text(
            re.compile(r"^T4 — US\$\d+\.\d\d/小时 — 本周还剩 1 小时 0 分钟$")
        )
        expect(page.locator(".gpucost-profile[data-profile='a100']")).to_have_text(
            re.compile(r"^2 × A100 80 GB — US\$\d+\.\d\d/小时 — 本周还剩 30 分钟$")
        )
        screenshot(page, "hub-spawn-allowance-zh.png")
    finally:
        context.close()
