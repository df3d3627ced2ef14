"""The service's parts built from its settings: the ledger, the allocation policy, the
budgets and the grace clock, joined in a :class:`~.service.HubService`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from ..core.billing import BillingRule
from ..core.catalog import PricePolicy
from ..core.hub_protocol import HubBudget
from .allocation import AllocationPolicy
from .ledger import HubLedger, default_url
from .model import HubConfigError
from .service import BudgetQuery, HubService, Standings

if TYPE_CHECKING:
    from .app import GpuCostHub

SETTING = "c.GpuCostHub"


@dataclass
class Parts:
    service: HubService
    tz: ZoneInfo
    data_dir: Path
    #: the ledger's URL without a password
    ledger_label: str


def build(app: GpuCostHub, prices: PricePolicy, tz: ZoneInfo) -> Parts:
    allocation = AllocationPolicy(app.profile_gpus, app.default_gpu, prices)
    standings = budget_standings(app)
    grace = grace_clock(app)
    data_dir = Path(app.data_dir)
    try:
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as e:
        raise HubConfigError(
            f"{SETTING}.data_dir = {app.data_dir!r} cannot be created: {e}"
        ) from None
    try:
        billing = BillingRule(int(app.billing_granularity_s), int(app.minimum_charge_s))
    except ValueError as e:
        raise HubConfigError(f"{SETTING}.billing_granularity_s / minimum_charge_s: {e}") from None
    url = app.ledger_url or default_url(data_dir)
    try:
        ledger = HubLedger(url, tz=tz, billing=billing)
    except HubConfigError:
        raise
    except Exception as e:
        raise HubConfigError(f"{SETTING}.ledger_url: the ledger cannot be opened: {e}") from None
    service = HubService(ledger, allocation.rate_for, standings, grace)
    return Parts(service=service, tz=tz, data_dir=data_dir, ledger_label=ledger.url)


def _amounts(raw: object, what: str) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise HubConfigError(f"{what} = {raw!r} is not valid: use {{'day': 5, 'month': 100}}")
    found = {}
    for scope, usd in raw.items():
        if scope not in ("session", "day", "month"):
            raise HubConfigError(f"{what}[{scope!r}] is not valid: use session, day or month")
        if isinstance(usd, bool) or not isinstance(usd, int | float) or usd < 0:
            raise HubConfigError(
                f"{what}[{scope!r}] = {usd!r} is not valid: use dollars, 0 or more"
            )
        found[scope] = round(usd * 1_000_000)
    return found


def budget_standings(app: GpuCostHub) -> Standings:
    users = app.user_budgets or {}
    groups = app.group_budgets or {}
    for name, raw in users.items() if isinstance(users, dict) else ():
        _amounts(raw, f"{SETTING}.user_budgets[{name!r}]")
    for name, raw in groups.items() if isinstance(groups, dict) else ():
        _amounts(raw, f"{SETTING}.group_budgets[{name!r}]")

    def standings(q: BudgetQuery) -> list[HubBudget]:
        found: list[HubBudget] = []
        raw = users(q.user, q.groups) if callable(users) else users.get(q.user, users.get("*"))
        mine = _amounts(raw, f"{SETTING}.user_budgets[{q.user!r}]")
        t = q.totals.get(q.user)
        spent = {
            "session": q.session_micro_usd,
            "day": t.today_micro_usd if t else 0,
            "month": t.month_micro_usd if t else 0,
        }
        for scope in ("session", "day", "month"):
            if scope in mine:
                found.append(HubBudget(scope, mine[scope], spent[scope], "user"))
        for group in q.groups:
            graw = groups(group) if callable(groups) else groups.get(group)
            amounts = _amounts(graw, f"{SETTING}.group_budgets[{group!r}]")
            members = [u for u, gs in q.groups_of.items() if group in gs]
            pooled = {
                "day": sum(q.totals[u].today_micro_usd for u in members if u in q.totals),
                "month": sum(q.totals[u].month_micro_usd for u in members if u in q.totals),
            }
            for scope in ("day", "month"):
                if scope in amounts:
                    found.append(
                        HubBudget(scope, amounts[scope], pooled[scope], f"group:{group}")  # type: ignore[arg-type]
                    )
        return found

    return standings


class Grace:
    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.stop_at: dict[int, datetime] = {}

    def update(self, server_id: int, over: HubBudget | None, now: datetime) -> datetime | None:
        from datetime import timedelta

        if over is None:
            self.stop_at.pop(server_id, None)
            return None
        return self.stop_at.setdefault(server_id, now + timedelta(seconds=self.grace_s))

    def due(self, now: datetime) -> list[int]:
        return [k for k, v in self.stop_at.items() if now >= v]

    def forget(self, server_id: int) -> None:
        self.stop_at.pop(server_id, None)


def grace_clock(app: GpuCostHub) -> Grace:
    return Grace(app.grace_s)
