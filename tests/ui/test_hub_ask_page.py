"""Asking for more, and deciding, on the service's own page in Chromium, through a real
JupyterHub and its proxy: the forms ride on the Hub's OAuth cookie and its XSRF token.

ann and carol are students (1 GPU-hour a week each); prof owns the students group's
allowance (a Hub role with ``custom:gpucost:approve!group=students``). ann asks on her
page, prof approves on his, and ann's page says approved; carol, no owner, sees no
buttons and her forged decision is refused; a POST without the XSRF token is refused.
carol, her server running (2 simulated A100s: 2 GPU-hours an hour), asks to keep running
4 hours: 8 GPU-hours.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from hub_service_fixture import Hub, chp_command, running_hub, spawn
from playwright.sync_api import Error, expect

from .conftest import screenshot
from .test_hub_pages import login, open_service

pytestmark = pytest.mark.browser

#: prof owns the students group's allowance; the service's OAuth tokens may carry the
#: approve scope (the Hub keeps only the part of it the user holds: prof's filter)
HUB_EXTRA = """
c.JupyterHub.custom_scopes["custom:gpucost:approve"] = {
    "description": "Approve requests for more GPU allowance"
}
c.JupyterHub.load_roles.append(
    {"name": "students-owners", "scopes": ["custom:gpucost:approve!group=students"],
     "users": ["prof"]}
)
_gpucost = [s for s in c.JupyterHub.services if s["name"] == "gpucost"][0]
_gpucost["oauth_client_allowed_scopes"].append("custom:gpucost:approve")
"""

SERVICE_EXTRA = """
c.GpuCostHub.group_allowances = {"students": {"gpu_hours": 1, "per": "week", "per_member": True}}
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    if chp_command() is None:
        pytest.fail("configurable-http-proxy not found: `npm install configurable-http-proxy`")
    root = tmp_path_factory.mktemp("hub-ask-page")
    with running_hub(
        root,
        budgets={},
        proxy=True,
        users=("ann", "carol"),
        groups={"students": ["ann", "carol"]},
        group_budgets={},
        service_extra=SERVICE_EXTRA,
        hub_extra=HUB_EXTRA,
    ) as hub:
        hub.wait("the proxy to route the Hub", lambda: _answers(f"{hub.public}/hub/login"), 60)
        yield hub


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def as_user(browser: Any, hub: Hub, user: str) -> Any:
    """A browser of its own for ``user``, logged in, on the service's page."""
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    login(page, hub, user)
    assert open_service(page, hub).status == 200
    return page


def test_asked_on_the_page_approved_by_the_owner_on_his(hub: Hub, browser: Any) -> None:
    ann = as_user(browser, hub, "ann")
    expect(ann.locator("#gpucost-ask")).to_be_visible()
    # a hostile amount is refused with a sentence, and nothing is asked
    ann.fill("#gpucost-ask-amount", "-5")
    ann.fill("#gpucost-ask-reason", "thesis run")
    ann.click("#gpucost-ask-send")
    expect(ann.locator("#gpucost-ask-error")).to_contain_text("Ask for more than 0")
    expect(ann.locator("#gpucost-my-request")).to_have_count(0)
    ann.fill("#gpucost-ask-amount", "2")
    ann.fill("#gpucost-ask-reason", "thesis run")
    ann.click("#gpucost-ask-send")
    mine = ann.locator("#gpucost-my-request")
    expect(mine).to_have_attribute("data-state", "open", timeout=30_000)
    expect(mine).to_contain_text("2 GPU-hours")
    expect(mine).to_contain_text("waiting for a decision")
    expect(ann.locator("#gpucost-ask")).to_have_count(0)  # one open request at a time
    expect(ann.locator("#gpucost-to-decide")).to_have_count(0)  # nobody decides their own
    screenshot(ann, "hub-ask-open.png")

    # carol is no owner: no buttons, and a decision posted with her own cookie and XSRF
    # token (a forged form) is refused with a sentence
    carol = as_user(browser, hub, "carol")
    expect(carol.locator("#gpucost-user-name")).to_have_text("carol")
    expect(carol.locator("#gpucost-to-decide")).to_have_count(0)
    expect(carol.locator("button[name='approve']")).to_have_count(0)
    token = carol.locator("#gpucost-ask input[name='_xsrf']").get_attribute("value")
    request_id = hub.svc("GET", "api/allowance/requests", hub.token_for("ann"))[1]["mine"][0]["id"]
    forged = carol.request.post(
        f"{hub.public}/services/gpucost/decide/{request_id}",
        form={"_xsrf": token, "approve": "approve"},
        max_redirects=0,
    )
    assert forged.status == 403
    assert "Only an owner of group students or an admin may decide this request." in forged.text()
    # a POST without the XSRF token is refused before anything is looked at
    bare = carol.request.post(
        f"{hub.public}/services/gpucost/decide/{request_id}",
        form={"approve": "approve"},
        max_redirects=0,
    )
    assert bare.status in (401, 403), bare.text()

    prof = as_user(browser, hub, "prof")
    row = prof.locator(f"#gpucost-to-decide tr[data-request='{request_id}']")
    expect(row).to_contain_text("ann")
    expect(row).to_contain_text("thesis run")
    screenshot(prof, "hub-ask-to-decide.png")
    row.locator("button[value='approve']").click()
    expect(prof.locator("#gpucost-to-decide")).to_have_count(0, timeout=30_000)

    ann.reload()
    mine = ann.locator("#gpucost-my-request")
    expect(mine).to_have_attribute("data-state", "approved", timeout=30_000)
    expect(mine).to_contain_text("Decided by prof")
    screenshot(ann, "hub-ask-approved.png")
    # the approval counts at once: the allowance is 1 + 2 GPU-hours this week
    allowances = hub.svc("GET", "api/me", hub.token_for("ann"))[1]["allowances"]
    assert allowances[0]["left"] == 3.0
    # and the ledger holds who asked, who decided
    code, listed = hub.svc("GET", "api/allowance/requests", hub.token_for("ann"))
    assert code == 200
    assert listed["mine"][0]["state"] == "approved"
    assert listed["mine"][0]["decided_by"] == "prof"


def test_keep_running_four_hours_asks_for_four_hours_of_the_running_server(
    hub: Hub, browser: Any
) -> None:
    code, body = spawn(hub, "carol")
    assert code in (201, 202), body
    carol = as_user(browser, hub, "carol")

    def keep_form_shown() -> bool:
        try:
            carol.reload(timeout=20_000)
            return bool(carol.locator("#gpucost-keep").count())
        except Error:
            return False  # not yet: the page did not load this time

    hub.wait("the page to offer keep running", keep_form_shown, 60)
    expect(carol.locator("#gpucost-keep-hours")).to_have_value("4")
    carol.fill("#gpucost-keep-reason", "training ends at six")
    carol.click("#gpucost-keep-send")
    mine = carol.locator("#gpucost-my-request")
    expect(mine).to_have_attribute("data-state", "open", timeout=30_000)
    expect(mine).to_contain_text("8 GPU-hours")
    screenshot(carol, "hub-ask-keep-running.png")
    hub.call("DELETE", "/users/carol/server")
