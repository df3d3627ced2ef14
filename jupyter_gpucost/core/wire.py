"""The JSON documents the package sends, typed: one ``TypedDict`` per document and part.

The single-user server's status (``GET /gpucost/api/status`` and the ``status/v1`` event),
kernels (``GET /gpucost/api/kernels``), history (``GET /gpucost/api/history``) and the
panel's live parts (the ``panel/v1`` event); the hub service's admin summary
(``GET /services/gpucost/api/summary``); the report protocol between them
(:mod:`.hub_protocol`) is typed beside this, in :mod:`.wire_report`. Each is built by one
function, annotated with its type here.

These types are the schema: ``scripts/wire_contract.py`` writes them out as
``labextension/src/__tests__/wire-contract.json``, which the Python tests check real
servers' documents against and the front end's tests check its TypeScript types against.

A part another module owns and types on its own (the budget's document, the machine's, a
cell's record, the exports) is a :data:`JsonObject` here: an object, whatever its keys.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict

#: a JSON object whose keys this module does not list (its owner's document)
JsonObject: TypeAlias = dict[str, object]


# -- the status document (server/status.py) ------------------------------------------------


class StatusWarning(TypedDict):
    code: str
    message: str


class StatusGpu(TypedDict):
    index: int
    uuid: str | None
    name: str
    model: str | None
    priced: bool
    price_usd_per_hour: float | None
    price_per_hour: float | None
    price_source: str | None
    price_as_of: str | None
    price_confidence: str | None
    price_provider: str | None
    price_market: str | None
    price_region: str | None
    price_basis: str | None
    price_basis_reason: str | None
    utilization_pct: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    power_w: float | None
    energy_j: float | None
    cost_usd: float
    cost: float
    used_cost_usd: float
    used_cost: float
    idle_cost_usd: float
    idle_cost: float
    unobserved_cost_usd: float
    unobserved_cost: float
    used_s: float
    idle_s: float
    unobserved_s: float
    lost: bool
    unavailable: dict[str, str]


class Billing(TypedDict):
    granularity_s: int
    minimum_charge_s: int


class Telemetry(TypedDict):
    source: str
    simulated: bool
    available: bool
    reason: str | None
    detail: JsonObject


class PricesJson(TypedDict):
    provider: str
    market: str
    instance: str | None
    as_of: str | None
    catalog_date: str | None
    overridden_models: list[str]


class StatusPayload(TypedDict):
    """The meter, telemetry and prices part of the status (``status_payload``)."""

    version: str
    currency: str
    currency_symbol: str
    session_started: str
    as_of: str
    elapsed_s: float
    billed_s: float
    cost_usd: float
    cost: float
    gpu_cost_usd: float
    gpu_cost: float
    rate_usd_per_hour: float
    rate_per_hour: float
    price_basis: str
    price_basis_reasons: list[str]
    used_cost_usd: float
    used_cost: float
    idle_cost_usd: float
    idle_cost: float
    unobserved_cost_usd: float
    unobserved_cost: float
    billing_adjustment_usd: float
    billing_adjustment: float
    base_price_usd_per_hour: float
    base_price_per_hour: float
    base_cost_usd: float
    base_cost: float
    energy_j: float | None
    samples: int
    billing: Billing
    gpus: list[StatusGpu]
    telemetry: Telemetry
    prices: PricesJson
    warnings: list[StatusWarning]


class LedgerReset(TypedDict):
    file: str
    reason: str
    sessions: int | None
    cost_micro_usd: int | None
    cost_micro: int | None


class LedgerState(TypedDict):
    """The ``ledger`` object: ``enabled`` and ``reason`` without a ledger, the rest with."""

    enabled: bool
    reason: NotRequired[str | None]
    url: NotRequired[str | None]
    flush_interval_s: NotRequired[float]
    timezone: NotRequired[str]
    reset_from: NotRequired[str | None]
    reset: NotRequired[LedgerReset | None]
    reachable: NotRequired[bool]
    unreachable_since: NotRequired[str | None]
    error: NotRequired[str | None]
    unwritten_s: NotRequired[float]
    unwritten_micro_usd: NotRequired[int]
    unwritten_micro: NotRequired[int]
    journaled: NotRequired[bool]


class MeteringState(TypedDict):
    state: str
    reason: str | None
    instance: str | None
    budget: str | None
    message: str | None


class Rightsizing(TypedDict):
    model: str
    gpus: int
    cost_usd: float
    cost: float
    instead_of_usd: float
    instead_of: float
    price_usd_per_hour: float
    price_per_hour: float
    peak_memory_bytes: int | None
    reason: str


class AttributionState(TypedDict):
    pids_visible: bool
    note: str | None


class StatusDocument(StatusPayload):
    """The whole status document (``status_document``)."""

    session_id: str
    today_usd: float | None
    today: float | None
    month_usd: float | None
    month: float | None
    all_time_usd: float | None
    all_time: float | None
    ledger: LedgerState
    carbon_intensity_g_per_kwh: float
    co2_g: float | None
    rightsizing: Rightsizing | None
    rightsizing_note: str | None
    attribution: AttributionState
    budget: JsonObject | None
    machine: JsonObject | None
    metering: MeteringState
    bill: JsonObject | None


# -- the kernels document (server/gpu_use/payload.py) ---------------------------------------


class KernelCostJson(TypedDict):
    id: str
    name: str
    notebook_path: str | None
    execution_state: str
    started: str | None
    uptime_s: float | None
    pids: list[int]
    gpu_host_pids: dict[str, list[int]]
    remote: bool
    gpu_share: dict[str, float]
    gpu_share_by: dict[str, str]
    memory_bytes: int | None
    cost_usd: float
    cost: float
    cost_micro_usd: int
    cost_micro: int
    cells: int
    cells_cost_usd: float
    cells_cost: float
    cells_cost_micro_usd: int
    cells_cost_micro: int


class OtherProcessJson(TypedDict):
    gpu: int
    host_pid: int
    memory_bytes: int | None


class KernelsMicro(TypedDict):
    total: int
    idle: int
    unattributed: int
    minimum_charge: int


class KernelsDocument(TypedDict):
    """``other_processes`` and ``micro_usd`` are there once a sample was attributed."""

    as_of: str
    pids_visible: bool
    note: str | None
    total_usd: float
    total: float
    idle_usd: float
    idle: float
    unattributed_usd: float
    unattributed: float
    minimum_charge_usd: float
    minimum_charge: float
    other_processes: NotRequired[list[OtherProcessJson]]
    micro_usd: NotRequired[KernelsMicro]
    micro: NotRequired[KernelsMicro]
    kernels: list[KernelCostJson]


# -- the history document (server/service.py, server/record/history.py) --------------------


class PointGpu(TypedDict):
    index: int
    utilization_pct: float | None
    memory_used_bytes: int | None
    power_w: float | None


class HistoryPoint(TypedDict):
    t: str
    cost_usd: float
    cost: float
    rate_usd_per_hour: float
    rate_per_hour: float
    gpus: list[PointGpu]


class HistoryGpu(TypedDict):
    index: int
    name: str


class HistorySession(TypedDict):
    id: str
    started: str
    ended: str | None
    cost_usd: float
    cost: float


class HistoryDay(TypedDict):
    date: str
    cost_usd: float
    cost: float


class HistoryTotals(TypedDict):
    """``unavailable``: why the sessions and days are empty (the ledger is unreachable)."""

    sessions: list[HistorySession]
    days: list[HistoryDay]
    unavailable: NotRequired[str]


class HistoryDocument(TypedDict):
    window_s: int
    step_s: int
    start: str
    end: str
    source: Literal["memory", "ledger"]
    oldest_in_memory: str | None
    gpus: list[HistoryGpu]
    points: list[HistoryPoint]
    totals: HistoryTotals


# -- the panel's live parts (server/status_events.py) ---------------------------------------


class PanelDocument(TypedDict):
    kernels: KernelsDocument
    cells: list[JsonObject]
    exports: JsonObject | None
    point: HistoryPoint | None


# -- the hub service's admin summary (hub/web/views.py) -------------------------------------


class UsageJson(TypedDict):
    """GPU use by the cluster's DCGM: used, idle and unknown, money and energy."""

    used_usd: float
    idle_usd: float
    unknown_usd: float
    used_micro_usd: int
    idle_micro_usd: int
    unknown_micro_usd: int
    energy_wh: float
    idle_energy_wh: float
    disagreements: int


class ServerUsageJson(UsageJson):
    seen: bool
    gpu_util_pct: list[float | None]
    power_w: float | None
    nodes: list[str]
    models: list[str]
    flag: JsonObject | None


class ClusterUse(TypedDict):
    """The cluster's Prometheus as the admin page shows it (``ClusterUsage.admin``)."""

    url: str
    ok_at: str | None
    down_since: str | None
    error: str | None
    refused: int
    tolerance_pct: float
    users: dict[str, UsageJson]
    servers: dict[str, ServerUsageJson]


class BudgetSummary(TypedDict):
    scope: str
    source: str
    amount_usd: float
    spent_usd: float
    share: float
    exceeded: bool


class ServerSummary(TypedDict):
    """A running server; ``gpu_use``: what DCGM saw, where the hub reads Prometheus."""

    server_name: str
    profile: str | None
    started: str
    gpus: str
    allocation: JsonObject
    usd_per_hour: float
    rate_source: str
    price_basis: str
    session_usd: float
    budgets: list[BudgetSummary]
    stop_at: str | None
    reason: str | None
    stop_plan: JsonObject | None
    idle: JsonObject | None
    gpu_use: NotRequired[ServerUsageJson | None]


class ChartDay(TypedDict):
    day: str
    usd: float


class Interruptions(TypedDict):
    count: int
    lost_usd: float


class UserSummary(TypedDict):
    """``gpu_use``: this month's GPU use, where the hub reads the cluster's Prometheus."""

    user: str
    groups: list[str]
    today_usd: float
    month_usd: float
    running: list[ServerSummary]
    budgets: list[BudgetSummary]
    near_budget: bool
    budget_share: float
    interruptions: Interruptions
    gpu_use: NotRequired[UsageJson]


class GroupSummary(TypedDict):
    group: str
    members: list[str]
    today_usd: float
    month_usd: float


class AlertsSummary(TypedDict):
    recent: list[JsonObject]
    failed: list[JsonObject]


class UserPageJson(TypedDict):
    """A user's own page (``views.me``): today, this month, sessions, a chart of days."""

    user: str
    today_usd: float
    month_usd: float
    running: list[ServerSummary]
    budgets: list[BudgetSummary]
    sessions: list[JsonObject]
    daily: list[ChartDay]
    warning: dict[str, str] | None
    allowances: NotRequired[list[JsonObject]]  # the API's answer adds them


class IdleSummaryJson(TypedDict):
    enabled: bool
    period_days: int
    idle_gpu_hours: float
    idle_usd: float
    reclaimed: int
    saved_usd: float
    freed_usd_per_hour: float
    savings_horizon_h: float


class AdminSummary(TypedDict):
    gpu_use: ClusterUse | None
    generated: str
    last_poll: str | None
    users: list[UserSummary]
    groups: list[GroupSummary]
    near_budget: list[str]
    running_servers: int
    usd_per_hour: float
    today_usd: float
    month_usd: float
    daily: list[ChartDay]
    idle: IdleSummaryJson | None
    interruptions: Interruptions
    alerts: AlertsSummary
