"""On the hub: a running server whose profile names a GPU with no price is billed at the
upper bound (core.catalog.upper_bound), labelled on the admin page; never $0."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hub_admin_page import admin_page

from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.hub.allocation import AllocationPolicy
from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.idle.policy import HubIdleClock, IdlePolicy
from jupyter_gpucost.hub.idle.reclaim import Reclaimer
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.reclaims import ReclaimStore
from jupyter_gpucost.hub.model import GpuAllocation, ServerInfo
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web import views

CATALOG = load_catalog()
NOW = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
DEAREST = max(r.per_gpu_hour for r in CATALOG.rows if r.currency == "USD")


def by_user(server: ServerInfo) -> object:
    """The admin's callable ``profile_gpus``: it names GPUs the catalog may not price."""
    return {"alice": "MI300X x 8", "bob": "A10G x 2", "carol": "H100-80GB"}.get(server.user)


def started(user: str) -> ServerInfo:
    return ServerInfo(user, "", NOW, True)


def test_a_gpu_with_no_price_is_billed_at_its_upper_bound_labelled() -> None:
    policy = AllocationPolicy(
        by_user, "none", PricePolicy(CATALOG, provider="gcp", region="us-central1")
    )
    alice = policy.rate_for(started("alice"))
    assert alice.allocation == GpuAllocation("MI300X", 8)
    assert alice.usd_per_hour == 8 * DEAREST
    assert alice.source.startswith("upper bound: the dearest GPU of the catalog")
    assert "(no price for MI300X: priced at the dearest GPU of the catalog" in alice.source
    assert "c.GpuCostHub.profile_gpus" in alice.source
    # no gcp price for an A10G: the dearest A10G price of the catalog
    bob = policy.rate_for(started("bob"))
    a10g = max(r.per_gpu_hour for r in CATALOG.rows if r.model == "A10G")
    assert bob.usd_per_hour == 2 * a10g
    assert "no gcp on-demand price for A10G: priced at the dearest known" in bob.source
    # a listed price is not an upper bound
    carol = policy.rate_for(started("carol"))
    listed = CATALOG.find(
        provider="gcp", market="on-demand", model="H100-80GB", region="us-central1"
    )
    assert listed is not None
    assert carol.usd_per_gpu_hour == listed.per_gpu_hour
    assert not carol.source.startswith("upper bound")


class _Hub:
    def __init__(self, servers: list[ServerInfo]) -> None:
        self.servers = servers

    async def active_servers(self) -> list[ServerInfo]:
        return self.servers

    async def stopped_at(self, user: str, server_name: str) -> datetime | None:
        return None  # a stand-in Hub keeps no record of stopped servers

    async def groups_of_users(self) -> dict[str, tuple[str, ...]]:
        return {}

    async def stop_server(self, user: str, server_name: str) -> str:
        return "stopped"


async def test_the_admin_page_says_the_rate_is_an_upper_bound(tmp_path: Path) -> None:
    ledger = HubLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    reclaimer = Reclaimer(
        IdlePolicy(None), HubIdleClock(max_step_s=10), ReclaimStore(ledger.engine)
    )
    policy = AllocationPolicy(by_user, "none", PricePolicy(CATALOG))
    svc = HubService(ledger, policy.rate_for, HubBudgetPolicy(None), HubEnforcer(60), reclaimer)
    await svc.poll(_Hub([started("alice")]), lambda: NOW)
    data = views.admin_summary(svc, NOW, NOW.date())
    running = [s for u in data["users"] for s in u["running"]]
    assert [s["price_basis"] for s in running] == ["upper-bound"]
    assert running[0]["usd_per_hour"] == float(8 * DEAREST)

    def page(language: str) -> str:
        return admin_page(svc, language, NOW, user="erin")

    english = page("en")
    assert f"8 × MI300X at ${8 * DEAREST:.2f}/h" in english
    assert "upper bound: no price fits these GPUs" in english
    assert 'title="upper bound: the dearest GPU of the catalog' in english
    chinese = page("zh_CN")
    assert ">upper bound: no price fits these GPUs<" not in chinese
    assert "上限" in chinese
