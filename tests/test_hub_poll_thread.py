"""The poll walks every server off the event loop: a report is answered while the poll's
sync is still running, and a server the sync closes meanwhile gets the answer of a server
the hub does not know (409), never an error."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.core.hub_protocol import SpendReport
from jupyter_gpucost.core.refusal import Refusal
from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.idle.policy import HubIdleClock, IdlePolicy
from jupyter_gpucost.hub.idle.reclaim import Reclaimer
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerInfo, UserTotals
from jupyter_gpucost.hub.service import HubService

NOW = datetime.now(UTC).replace(microsecond=0)
RATE = Rate(GpuAllocation("A100-80GB", 2), Decimal("3.431"), "test")
USERS = 200


def server(i: int) -> ServerInfo:
    return ServerInfo(f"user{i:04d}", "", NOW - timedelta(minutes=10), True)


def spend(i: int, cost_micro_usd: int) -> SpendReport:
    return SpendReport("s-1", "", NOW - timedelta(minutes=10), NOW, cost_micro_usd, 0, 0)


class Hub:
    """The Hub's API as the poll calls it: the servers listed, no stop asked."""

    def __init__(self, servers: list[ServerInfo]) -> None:
        self.servers = servers

    async def active_servers(self) -> list[ServerInfo]:
        return list(self.servers)

    async def stopped_at(self, user: str, server_name: str) -> datetime | None:
        return None  # a stand-in Hub keeps no record of stopped servers

    async def groups_of_users(self) -> dict[str, tuple[str, ...]]:
        return {}

    async def stop_server(self, user: str, server_name: str) -> str:
        raise AssertionError("nothing is over budget")


class PausedTotals:
    """``all_totals`` of the real ledger, held mid-sync until the test lets it go: the
    poll is then provably still walking the servers."""

    def __init__(self, ledger: HubLedger) -> None:
        self.ledger = ledger
        self.real = ledger.all_totals
        self.inside = threading.Event()
        self.go_on = threading.Event()

    def __call__(self, now: datetime) -> dict[str, UserTotals]:
        self.inside.set()
        assert self.go_on.wait(10), "the test never let the sync go on"
        return self.real(now)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[HubService]:
    ledger = HubLedger(f"sqlite:///{tmp_path / 'hub.sqlite'}", billing=BillingRule(1, 0))
    reclaimer = Reclaimer(IdlePolicy(None), HubIdleClock(max_step_s=30), None)
    svc = HubService(ledger, lambda s: RATE, HubBudgetPolicy(), HubEnforcer(60), reclaimer)
    svc.sync([server(i) for i in range(USERS)], NOW)
    yield svc
    svc.ledger.close()


async def test_a_report_is_answered_while_the_poll_walks_the_servers(
    service: HubService,
) -> None:
    paused = PausedTotals(service.ledger)  # type: ignore[arg-type]
    service.ledger.all_totals = paused  # type: ignore[method-assign]
    hub = Hub([server(i) for i in range(USERS)])
    poll = asyncio.create_task(service.poll(hub, lambda: NOW + timedelta(seconds=10)))
    try:
        assert await asyncio.to_thread(paused.inside.wait, 10), "the poll never synced"
        # the sync is paused in its thread: the event loop still takes reports
        reply = service.report("user0007", spend(7, 1_000), NOW + timedelta(seconds=10))
        assert reply.user == "user0007"
        assert not poll.done()
    finally:
        paused.go_on.set()
    result = await asyncio.wait_for(poll, 10)
    assert result.opened == result.closed == 0
    assert len(service.rows) == USERS


async def test_a_report_for_a_server_the_poll_closes_meanwhile_is_refused_by_name(
    service: HubService,
) -> None:
    paused = PausedTotals(service.ledger)  # type: ignore[arg-type]
    service.ledger.all_totals = paused  # type: ignore[method-assign]
    # user0003's server is gone from the Hub's list: this poll closes it
    hub = Hub([server(i) for i in range(USERS) if i != 3])
    poll = asyncio.create_task(service.poll(hub, lambda: NOW + timedelta(seconds=10)))
    try:
        assert await asyncio.to_thread(paused.inside.wait, 10), "the poll never synced"
        with pytest.raises(Refusal) as refused:
            service.report("user0003", spend(3, 1_000), NOW + timedelta(seconds=10))
        assert refused.value.status == 409
        assert "no running server" in str(refused.value)
        # another user's report is kept and answered
        assert service.report("user0004", spend(4, 1_000), NOW).user == "user0004"
    finally:
        paused.go_on.set()
    result = await asyncio.wait_for(poll, 10)
    assert result.closed == 1
    assert ("user0003", "") not in service.rows
    assert ("user0003", "") not in service.activity


async def test_groups_learnt_while_the_poll_runs_are_kept(service: HubService) -> None:
    # the spawn hook names a user's groups (a group budget may refuse the spawn) while the
    # poll's thread merges the running users' groups: neither loses the other's
    paused = PausedTotals(service.ledger)  # type: ignore[arg-type]
    service.ledger.all_totals = paused  # type: ignore[method-assign]
    hub = Hub([replace_groups(server(i), ("team",)) for i in range(USERS)])
    poll = asyncio.create_task(service.poll(hub, lambda: NOW + timedelta(seconds=10)))
    try:
        assert await asyncio.to_thread(paused.inside.wait, 10), "the poll never synced"
        service.learn_groups("newcomer", ("ml",))
    finally:
        paused.go_on.set()
    await asyncio.wait_for(poll, 10)
    assert service.groups_of["newcomer"] == ("ml",)
    assert service.groups_of["user0001"] == ("team",)


def replace_groups(info: ServerInfo, groups: tuple[str, ...]) -> ServerInfo:
    return dataclasses.replace(info, groups=groups)
