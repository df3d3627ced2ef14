"""The report protocol's JSON, typed: a single-user server's report to the hub service and
the service's answer (:mod:`.hub_protocol`), beside the other wire documents of
:mod:`.wire`; ``scripts/wire_contract.py`` writes them into the same contract. Their keys
are a protocol between two processes that may run different versions: they keep their
names."""

from __future__ import annotations

from typing import TypedDict

from .wire import JsonObject


class KernelSpendJson(TypedDict):
    kernel_id: str
    name: str
    cost_micro_usd: int


class GpuTimeJson(TypedDict):
    used_us: int
    idle_us: int


class SpendReportJson(TypedDict):
    """A single-user server's report to the hub service (``SpendReport.to_json``)."""

    version: int
    session_id: str
    server_name: str
    started: str
    sent: str
    cost_micro_usd: int
    idle_micro_usd: int
    rate_micro_usd_per_s: int
    energy_wh: float | None
    cells: int
    kernels: list[KernelSpendJson]
    gpu_models: list[str]
    kernels_busy: int | None
    gpu_time: list[GpuTimeJson]
    interruptions: list[JsonObject]


class HubBudgetJson(TypedDict):
    scope: str
    amount_micro_usd: int
    spent_micro_usd: int
    source: str


class HubReplyJson(TypedDict):
    """The hub service's answer to a report (``HubReply.to_json``)."""

    version: int
    allowances: list[JsonObject]
    user: str
    session_micro_usd: int
    today_micro_usd: int
    month_micro_usd: int
    budgets: list[HubBudgetJson]
    stop_at: str | None
    reason: str | None
    stop_kind: str | None
    ledger_unreachable_since: str | None
