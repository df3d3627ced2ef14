"""The hub's pages write money by the one rule of every surface: a table's column has one
number of decimals (never $0.0608 above $0.11), and the currency is spelled as the page's
language spells it (``¥`` in Chinese, ``CN¥`` in English), as in JupyterLab."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from test_hub_upper_bound import _Hub  # the stand-in Hub API: running servers, nothing stopped

from jupyter_gpucost.core import money
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.core.i18n import messages_for
from jupyter_gpucost.hub.allocation import AllocationPolicy
from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.idle.policy import HubIdleClock, IdlePolicy
from jupyter_gpucost.hub.idle.reclaim import Reclaimer
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.reclaims import ReclaimStore
from jupyter_gpucost.hub.model import ServerInfo
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web import handlers, views

CATALOG = load_catalog()
NOW = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
#: the amounts of the admin page's "Today" column
TODAY = re.compile(
    r'<tr data-user="(\w+)"[^>]*>\s*<td>\w+</td><td>[^<]*</td>\s*<td class="text-end">([^<]+)</td>'
)


def profile(server: ServerInfo) -> object:
    """One user on eight H100s (dollars an hour), one on a single T4 (cents)."""
    return {"alice": "H100-80GB x 8", "bob": "T4"}.get(server.user)


async def admin_data(tmp_path: Path) -> dict[str, object]:
    ledger = HubLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    reclaimer = Reclaimer(
        IdlePolicy(None), HubIdleClock(max_step_s=10), ReclaimStore(ledger.engine)
    )
    policy = AllocationPolicy(profile, "none", PricePolicy(CATALOG, provider="gcp"))
    svc = HubService(ledger, policy.rate_for, HubBudgetPolicy(None), HubEnforcer(60), reclaimer)
    hub = _Hub([ServerInfo("alice", "", NOW, True), ServerInfo("bob", "", NOW, True)])
    later = NOW + timedelta(minutes=3)
    await svc.poll(hub, lambda: NOW)
    await svc.poll(hub, lambda: later)
    return views.admin_summary(svc, later, later.date())


def page(data: dict[str, object], language: str, symbol: str) -> str:
    return handlers.render(
        handlers.templates(symbol),
        "gpucost_admin.html",
        messages_for(language),
        symbol,
        hub_prefix="/hub/",
        service_url="/services/gpucost/",
        user="erin",
        is_admin=True,
        xsrf_token="x",
        data=data,
        chart=views.bars(data["daily"]),  # type: ignore[arg-type]
    )


async def test_a_column_of_the_admin_page_has_one_number_of_decimals(tmp_path: Path) -> None:
    data = await admin_data(tmp_path)
    users = {u["user"]: u for u in data["users"]}  # type: ignore[attr-defined]
    bob = Decimal(str(users["bob"]["today_usd"]))
    alice = Decimal(str(users["alice"]["today_usd"]))
    # the premise: one amount under ten cents, one above
    assert 0 < bob < Decimal("0.1") < alice
    shown = dict(TODAY.findall(page(data, "en", "$")))
    assert shown == {
        "alice": money.status_bar(alice, "$", digits=4),
        "bob": money.status_bar(bob, "$", digits=4),
    }, shown
    assert all(len(text.rpartition(".")[2]) == 4 for text in shown.values()), shown


async def test_the_currency_is_spelled_as_the_pages_language_spells_it(tmp_path: Path) -> None:
    data = await admin_data(tmp_path)
    chinese = page(data, "zh_CN", "CN¥")
    english = page(data, "en", "CN¥")
    figures = re.compile(r"(CN¥|¥|CNY)\s?\d")
    assert {m.group(1) for m in figures.finditer(chinese)} == {"¥"}
    assert {m.group(1) for m in figures.finditer(english)} == {"CN¥"}
