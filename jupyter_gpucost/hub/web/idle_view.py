"""What the pages show of the idle policy: each running server's idle standing, and over
the last :data:`PERIOD_DAYS` days the idle GPU-hours, what they cost and what reclaiming
saved (see :mod:`.ledger.reclaims` for how "saved" is counted). Pure data, no tornado."""

from __future__ import annotations

from datetime import datetime, timedelta

from ...core.billing import rounded_cost_micro
from ...core.wire import IdleSummaryJson, JsonObject
from ..ledger.reclaims import SAVINGS_HORIZON_S
from ..model import ServerRow
from ..service import HubService

#: the admin page's idle figures cover this many days
PERIOD_DAYS = 30


def _usd(micro_usd: int) -> float:
    return round(micro_usd / 1_000_000, 6)


def idle_json(service: HubService, row: ServerRow) -> JsonObject | None:
    """A running server's ``idle`` object (``None`` when no idle policy runs)."""
    reclaim = service.reclaim
    if reclaim is None or not reclaim.enabled:
        return None
    view = reclaim.view(row)
    rule = view.rule
    return {
        "policy": None
        if rule is None
        else {
            "after_min": round(rule.after_s / 60, 3),
            "warn_min": round(rule.warn_s / 60, 3),
            "busy_idle_max_min": None
            if rule.busy_idle_max_s is None
            else round(rule.busy_idle_max_s / 60, 3),
        },
        # "idle", "busy" or "unknown", as of the last poll or report
        "state": view.judgement.verdict,
        "gpu_source": view.judgement.gpu_source,
        "gpus_idle": view.judgement.gpus_idle,
        "kernel_busy": view.judgement.kernel_busy,
        "idle_min": round(view.idle_s / 60, 2),
        "stop_at": None if view.warning is None else view.warning.stop_at.isoformat(),
        # GPUs idle by DCGM, kept up only by a kernel the server reports busy
        "spared_by_kernel": view.spared_by_kernel,
        "dcgm_idle_min": round(view.dcgm_idle_s / 60, 2),
    }


def idle_summary(service: HubService, now: datetime) -> IdleSummaryJson | None:
    """The idle GPU-hours of the period (ended spans and the running servers' current
    ones), their cost, the servers reclaimed and what that saved."""
    reclaim = service.reclaim
    if reclaim is None or reclaim.store is None:
        return None
    summary = reclaim.store.summary(now - timedelta(days=PERIOD_DAYS), now)
    live_gpu_us = 0
    live_micro_usd = 0
    for row in service.rows.values():
        idle_us = round(reclaim.view(row).idle_s * 1_000_000)
        live_gpu_us += idle_us * row.rate.allocation.count
        live_micro_usd += rounded_cost_micro(row.rate.usd_per_hour, idle_us)
    return {
        "enabled": reclaim.enabled,
        "period_days": PERIOD_DAYS,
        "idle_gpu_hours": round((summary.idle_gpu_us + live_gpu_us) / 3.6e9, 3),
        "idle_usd": _usd(summary.idle_micro_usd + live_micro_usd),
        "reclaimed": summary.reclaimed,
        "saved_usd": _usd(summary.saved_micro_usd),
        "freed_usd_per_hour": float(summary.freed_usd_per_hour),
        "savings_horizon_h": SAVINGS_HORIZON_S / 3600,
    }


def idle_gauges(service: HubService) -> list[tuple[str, str, float]]:
    """``/metrics``: the running servers idle now, warned, and kept by a reported busy
    kernel while DCGM sees their GPUs idle (none while no idle policy runs)."""
    reclaim = service.reclaim
    if reclaim is None or not reclaim.enabled:
        return []
    views = [reclaim.view(row) for row in service.rows.values()]
    return [
        (
            "gpucost_hub_servers_idle",
            "running servers with every GPU idle and no kernel busy",
            float(sum(v.judgement.verdict == "idle" for v in views)),
        ),
        (
            "gpucost_hub_servers_idle_warned",
            "running servers warned for idle GPUs (stopping)",
            float(sum(v.warning is not None for v in views)),
        ),
        (
            "gpucost_hub_servers_kept_by_busy_kernel",
            "running servers whose GPUs DCGM sees idle, kept by a kernel they report busy",
            float(sum(v.spared_by_kernel for v in views)),
        ),
    ]
