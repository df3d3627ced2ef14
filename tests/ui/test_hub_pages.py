"""The gpucost service's pages in Chromium, through a real JupyterHub and its
configurable-http-proxy: log in with the hub's login form, follow the Hub OAuth flow to the
service, see your own spend; an admin sees every user.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hub_service_fixture import Hub, chp_command, running_hub, spawn
from playwright.sync_api import expect

from .conftest import screenshot

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    if chp_command() is None:
        pytest.fail(
            "configurable-http-proxy not found: `npm install configurable-http-proxy` "
            "(or set GPUCOST_CHP to its path)"
        )
    root = tmp_path_factory.mktemp("hubpages")
    # dave's day budget is $0: the hub refuses every spawn of his
    budgets = {"*": {"month": 100}, "dave": {"day": 0}}
    with running_hub(root, budgets=budgets, proxy=True) as hub:
        for user in ("alice", "bob", "carol"):
            spawn(hub, user)
        yield hub


def login(page: Any, hub: Hub, user: str) -> None:
    page.goto(f"{hub.public}/hub/login?next=%2Fhub%2Fhome", timeout=30_000)
    page.fill("#username_input", user)
    page.fill("#password_input", "any-password")
    page.click("#login_submit")
    page.wait_for_url("**/hub/home", timeout=30_000)


def open_service(page: Any, hub: Hub, path: str = "") -> Any:
    """Open a service page: the Hub OAuth round trip happens on the way."""
    return page.goto(f"{hub.public}/services/gpucost/{path}", timeout=30_000)


def test_a_user_sees_only_their_own_spend(hub: Hub, page: Any) -> None:
    login(page, hub, "bob")
    response = open_service(page, hub)
    assert response.status == 200
    assert page.url.startswith(f"{hub.public}/services/gpucost/")
    expect(page.locator("#gpucost-user-name")).to_have_text("bob")
    expect(page.locator("#gpucost-today")).to_contain_text("$")
    expect(page.locator("#gpucost-sessions tbody tr")).to_have_count(1)
    # JupyterHub's own look: its stylesheet and navigation bar
    expect(page.locator("nav.navbar")).to_be_visible()
    assert page.locator("link[href='/hub/static/css/style.min.css']").count() == 1
    assert page.locator("#gpucost-nav-admin").count() == 0
    assert "alice" not in page.content()
    screenshot(page, "hub-user-page.png")
    # the admin page and data are not for bob
    response = open_service(page, hub, "admin")
    assert response.status == 403
    response = open_service(page, hub, "api/admin/summary")
    assert response.status == 403


def test_a_browser_that_asks_for_chinese_reads_the_pages_in_chinese(hub: Hub, page: Any) -> None:
    page.set_extra_http_headers({"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"})
    login(page, hub, "bob")
    open_service(page, hub)
    expect(page.locator("#gpucost-user-name")).to_have_text("bob")
    expect(page.locator("h1")).to_contain_text("的 GPU 花费")
    for label in ("今天", "本月", "正在运行", "会话"):
        expect(page.locator("#gpucost-user")).to_contain_text(label)
    expect(page.locator("#gpucost-sessions thead")).to_contain_text("服务器")
    expect(page.locator("#gpucost-nav-me")).to_have_text("我的 GPU 花费")
    expect(page.locator(".gpucost-budget").first).to_contain_text("已花费")
    # the budget's scope and whom it is set for in words, not the API's "month (user)"
    month = page.locator(".gpucost-budget[data-scope='month']")
    expect(month).to_contain_text("每月预算（个人）")  # noqa: RUF001
    for english in ("Today", "This month", "Sessions", "GPU spend of", "month (user)"):
        expect(page.locator("#gpucost-user")).not_to_contain_text(english)
    screenshot(page, "hub-user-page-zh.png")


def test_an_admin_sees_every_user(hub: Hub, page: Any) -> None:
    login(page, hub, "carol")
    response = open_service(page, hub, "admin")
    assert response.status == 200
    rows = page.locator("#gpucost-users tbody tr")
    expect(rows).to_have_count(3)
    for user in ("alice", "bob", "carol"):
        expect(page.locator(f"#gpucost-users tr[data-user='{user}']")).to_contain_text(
            "2 × A100-80GB"
        )
    expect(page.locator("#gpucost-groups")).to_contain_text("finance")
    expect(page.locator(".gpucost-chart svg rect")).to_have_count(31)
    with page.expect_download() as download:
        page.click("#gpucost-csv")
    csv_path = download.value.path()
    lines = Path(csv_path).read_text().splitlines()
    assert lines[0].startswith("user,groups,today_usd")
    assert len(lines) == 4
    screenshot(page, "hub-admin-page.png")


def test_the_spawn_page_says_why_a_spawn_is_refused(hub: Hub, page: Any) -> None:
    login(page, hub, "dave")
    page.goto(f"{hub.public}/hub/spawn", timeout=60_000)
    message = page.locator("text=Your server cannot start.")
    expect(message).to_be_visible(timeout=30_000)
    expect(message).to_contain_text("Your day budget of $0.00 (set by your hub admin) is spent")
    screenshot(page, "hub-spawn-refused.png")
    assert hub.server("dave") is None


def test_the_spawn_page_says_it_in_the_browser_s_language(hub: Hub, page: Any) -> None:
    page.set_extra_http_headers({"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"})
    login(page, hub, "dave")
    page.goto(f"{hub.public}/hub/spawn", timeout=60_000)
    message = page.locator("text=您的服务器无法启动。")
    expect(message).to_be_visible(timeout=30_000)
    expect(message).to_contain_text("您的每日预算 US$0.00（由您的 Hub 管理员设置）已用完")  # noqa: RUF001
    expect(message).not_to_contain_text("Your server cannot start")
    screenshot(page, "hub-spawn-refused-zh.png")
    assert hub.server("dave") is None


def test_the_admin_scope_makes_an_admin_through_oauth(hub: Hub, page: Any) -> None:
    # erin is in no admin group and no Hub admin: a role gives her custom:gpucost:admin
    login(page, hub, "erin")
    response = open_service(page, hub, "admin")
    assert response.status == 200
    expect(page.locator("#gpucost-users tbody tr")).to_have_count(3)
