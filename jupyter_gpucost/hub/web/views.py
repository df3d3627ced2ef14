"""What the pages and the CSV show (``/metrics``: :mod:`.metrics_view`), computed from the
service's state: a user's own spend, and for admins every user and group. Pure data, no
tornado.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from fractions import Fraction

from ...core import wire
from ...core.hub_protocol import HubBudget
from ..accounting import month_start
from ..allocation import describe
from ..cluster.usage import usage_json
from ..ledger.usage import UsageTotals
from ..model import GpuAllocation, HubLedgerDown, InterruptionTotals, ServerRow, UserTotals
from ..service import HubService
from .billed_view import CSV_COLUMNS, UNALLOCATED, BilledMonth
from .idle_view import idle_json, idle_summary

#: a user is "near" a budget from this share of it on
NEAR_SHARE = 0.8
#: the chart's span
CHART_DAYS = 31


def usd(micro_usd: int) -> float:
    return round(micro_usd / 1_000_000, 6)


def budget_json(budget: HubBudget) -> wire.BudgetSummary:
    share = budget.spent_micro_usd / budget.amount_micro_usd if budget.amount_micro_usd else 1.0
    return {
        "scope": budget.scope,
        "source": budget.source,
        "amount_usd": usd(budget.amount_micro_usd),
        "spent_usd": usd(budget.spent_micro_usd),
        "share": round(share, 4),
        "exceeded": budget.exceeded,
    }


#: how the source of a rate priced at an upper bound begins (core.catalog.upper_bound)
UPPER_BOUND = "upper bound:"


def _servers(
    service: HubService, user: str, rows: list[ServerRow] | None = None
) -> list[wire.ServerSummary]:
    """A user's running servers (``rows``: theirs, when the caller has them at hand)."""
    if rows is None:
        rows = [row for (name, _), row in service.rows.items() if name == user]
    found: list[wire.ServerSummary] = []
    for row in sorted(rows, key=lambda r: r.server_name):
        server_name = row.server_name
        standing = service.state.get(row.server_id)
        rate = row.rate
        found.append(
            {
                "server_name": server_name,
                "profile": row.profile,
                "started": row.started.isoformat(),
                # a share shows as its fraction: "1/7 × A100-40GB (MIG 1g.5gb)"
                "gpus": describe(rate.allocation),
                # the same, for the page to write in its language
                "allocation": allocation_json(rate.allocation),
                "usd_per_hour": float(rate.usd_per_hour),
                "rate_source": rate.source,
                # "upper-bound": no price fits its GPU, billed at the most it can cost
                "price_basis": "upper-bound" if rate.source.startswith(UPPER_BOUND) else "catalog",
                "session_usd": usd(standing.session_micro_usd) if standing else 0.0,
                "budgets": [budget_json(b) for b in standing.budgets] if standing else [],
                "stop_at": standing.stop_at.isoformat() if standing and standing.stop_at else None,
                "reason": standing.reason if standing else None,
                "stop_plan": standing.plan.to_json() if standing and standing.plan else None,
                "idle": idle_json(service, row),
            }
        )
    return found


def _chart(rows: Iterable[tuple[date, str, int]], today: date) -> list[wire.ChartDay]:
    by_day: dict[date, int] = defaultdict(int)
    for day, _user, micro in rows:
        by_day[day] += micro
    days = [today - timedelta(days=n) for n in range(CHART_DAYS - 1, -1, -1)]
    return [{"day": d.isoformat(), "usd": usd(by_day.get(d, 0))} for d in days]


def me(service: HubService, user: str, now: datetime, today: date) -> wire.UserPageJson:
    """A user's own page: today, this month, their sessions and a chart of days."""
    since = today - timedelta(days=CHART_DAYS - 1)
    budgets = [budget_json(b) for b in service.budgets_for(user)]
    warning = None
    try:
        totals = service.totals.get(user) or service.ledger.totals(user, now)
        sessions = [_session(s) for s in service.ledger.sessions(user, limit=50, now=now)]
        daily = service.ledger.daily(since, user, now=now)
    except HubLedgerDown:
        # from memory: the last poll's totals; past sessions and days wait for the ledger
        totals = service.totals.get(user) or UserTotals(user, 0, 0)
        sessions, daily = [], [(today, user, totals.today_micro_usd)]
    down = service.ledger.unreachable_since()
    if down is not None:
        warning = {
            "code": "ledger-unreachable",
            "since": down.isoformat(timespec="seconds"),
            "message": f"The hub's ledger is unreachable since {down:%H:%M} UTC: today and "
            "this month are the service's own figures, kept in memory and written when it "
            "is back; past sessions are not shown meanwhile.",
        }
    return {
        "user": user,
        "today_usd": usd(totals.today_micro_usd),
        "month_usd": usd(totals.month_micro_usd),
        "running": _servers(service, user),
        "budgets": budgets,
        "sessions": sessions,
        "daily": _chart(daily, today),
        "warning": warning,
    }


def _when(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime | date) else value


def allocation_json(a: GpuAllocation) -> dict[str, object]:
    """A server's GPUs for the pages to write in their language (:mod:`.page_words`)."""
    return {
        "model": a.model,
        "count": a.count,
        "share": str(a.share),
        "detail": a.detail,
        "instance": a.instance,
        "instance_gpus": a.instance_gpus,
    }


def _session(row: dict[str, object]) -> dict[str, object]:
    """A session as the ledger lists it, plus what the page shows: GPUs and the bill."""
    found = {k: _when(v) for k, v in row.items()}
    model, count = row.get("gpu_model"), row.get("gpu_count")
    found["gpus"] = f"{count} × {model}" if model and count else "no GPU"
    share = row.get("gpu_share")
    if model and isinstance(count, int) and count and share is not None:
        # a part of a GPU or of a node, as the admin page shows it
        try:
            part = GpuAllocation(
                str(model),
                count,
                Fraction(str(share)),
                str(row.get("gpu_detail") or ""),
                str(row.get("gpu_instance") or ""),
                int(str(row.get("gpu_instance_gpus") or 0)),
            )
        except (ValueError, ZeroDivisionError):
            part = None
        if part is not None:
            found["gpus"] = describe(part)
            found["allocation"] = allocation_json(part)
    billed = row.get("billed_micro_usd")
    found["bill_usd"] = usd(billed) if isinstance(billed, int) else None
    reported = row.get("reported_micro_usd")
    found["reported_usd"] = usd(reported) if isinstance(reported, int) else None
    return found


def _near(budgets: list[wire.BudgetSummary]) -> float:
    return max((b["share"] for b in budgets), default=0.0)


def admin_summary(
    service: HubService,
    now: datetime,
    today: date,
    alerts: wire.AlertsSummary | None = None,
) -> wire.AdminSummary:
    """Every user and group: spend today and this month, running servers, budget shares;
    the last alerts and failed deliveries (``alerts``, targets masked: none when the hub
    sends no alerts)."""
    totals = service.totals or service.ledger.all_totals(now)
    by_user: dict[str, list[ServerRow]] = defaultdict(list)
    for (user, _), row in service.rows.items():
        by_user[user].append(row)
    # the spot interruptions their servers reported this month (shown, never billed)
    interrupted = service.ledger.interruptions_by_user(month_start(today))
    names = set(totals) | set(by_user) | set(interrupted)
    users: list[wire.UserSummary] = []
    for name in sorted(names):
        t = totals.get(name) or UserTotals(name, 0, 0)
        budgets = [budget_json(b) for b in service.budgets_for(name)]
        servers = _servers(service, name, by_user.get(name, []))
        for server in servers:
            budgets.extend(server["budgets"])
        users.append(
            {
                "user": name,
                "groups": list(service.groups_of.get(name, ())),
                "today_usd": usd(t.today_micro_usd),
                "month_usd": usd(t.month_micro_usd),
                "running": servers,
                "budgets": _dedupe(budgets),
                "near_budget": _near(budgets) >= NEAR_SHARE,
                "budget_share": round(_near(budgets), 4),
                "interruptions": _interruptions(interrupted.get(name)),
            }
        )
    groups: dict[str, wire.GroupSummary] = {}
    for entry in users:
        for group in entry["groups"]:
            g = groups.setdefault(
                group, {"group": group, "members": [], "today_usd": 0.0, "month_usd": 0.0}
            )
            g["members"].append(entry["user"])
            g["today_usd"] = round(g["today_usd"] + entry["today_usd"], 6)
            g["month_usd"] = round(g["month_usd"] + entry["month_usd"], 6)
    since = today - timedelta(days=CHART_DAYS - 1)
    gpu_use = _gpu_use(service, users, today)
    return {
        "gpu_use": gpu_use,
        "generated": now.isoformat(),
        "last_poll": service.last_poll.isoformat() if service.last_poll else None,
        "users": users,
        "groups": sorted(groups.values(), key=lambda g: str(g["group"])),
        "near_budget": [u["user"] for u in users if u["near_budget"]],
        "running_servers": len(service.rows),
        "usd_per_hour": round(sum(float(r.rate.usd_per_hour) for r in service.rows.values()), 6),
        "today_usd": round(sum(u["today_usd"] for u in users), 6),
        "month_usd": round(sum(u["month_usd"] for u in users), 6),
        "daily": _chart(service.ledger.daily(since, now=now), today),
        "idle": idle_summary(service, now),
        "interruptions": _interruptions(
            InterruptionTotals(
                sum(t.count for t in interrupted.values()),
                sum(t.lost_micro_usd for t in interrupted.values()),
            )
        ),
        "alerts": alerts.copy() if alerts is not None else {"recent": [], "failed": []},
    }


def _interruptions(totals: InterruptionTotals | None) -> wire.Interruptions:
    """A user's (or everyone's) spot interruptions this month, as their servers reported
    them: how many, and what was computed since each one's last checkpoint and lost."""
    t = totals or InterruptionTotals()
    return {"count": t.count, "lost_usd": usd(t.lost_micro_usd)}


def _gpu_use(
    service: HubService, users: list[wire.UserSummary], today: date
) -> wire.ClusterUse | None:
    """GPU use from the cluster's Prometheus (None when not configured), also put on each
    user (this month) and each running server (its session, what DCGM saw last)."""
    if service.cluster is None:
        return None
    found = service.cluster.admin(today)
    by_user = found["users"]
    by_server = found["servers"]
    none = usage_json(UsageTotals())
    for entry in users:
        entry["gpu_use"] = by_user.get(entry["user"], none)
        for server in entry["running"]:
            server["gpu_use"] = by_server.get(f"{entry['user']}/{server['server_name']}")
    return found


def _dedupe(budgets: list[wire.BudgetSummary]) -> list[wire.BudgetSummary]:
    seen: dict[tuple[str, str], wire.BudgetSummary] = {}
    for b in budgets:
        key = (b["scope"], b["source"])
        if key not in seen or b["share"] > seen[key]["share"]:
            seen[key] = b
    return list(seen.values())


def users_csv(summary: wire.AdminSummary, billed: BilledMonth | None = None) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [
            "user",
            "groups",
            "today_usd",
            "month_usd",
            "running_servers",
            "usd_per_hour",
            "budget_share",
            # this month's allocation split by the cluster's DCGM (empty without
            # c.GpuCostHub.prometheus_url), as the admin page's "GPU used / idle / unknown"
            "gpu_used_usd",
            "gpu_idle_usd",
            "gpu_unknown_usd",
            "gpu_energy_wh",
            "gpu_idle_energy_wh",
            "dcgm_disagreements",
            # each running server's GPUs, a share as its fraction ("1/7 × A100-40GB (MIG
            # 1g.5gb)", "1/8 of p4d.24xlarge (1 × A100-40GB)"), "; " between servers
            "running_gpus",
            # spot interruptions this month as the user's servers reported them, and what
            # was computed since each one's last checkpoint (shown, never billed)
            "interruptions",
            "interruptions_lost_usd",
            # this month's cost on the cloud's reconciled bill, the estimate of the same
            # days and nodes, estimated ÷ billed (empty without a reconciled bill)
            *CSV_COLUMNS,
        ]
    )
    for u in summary["users"]:
        use = u.get("gpu_use") if summary.get("gpu_use") is not None else None
        split = (
            [
                f"{use['used_micro_usd'] / 1_000_000:.6f}",
                f"{use['idle_micro_usd'] / 1_000_000:.6f}",
                f"{use['unknown_micro_usd'] / 1_000_000:.6f}",
                f"{use['energy_wh']:.3f}",
                f"{use['idle_energy_wh']:.3f}",
                use["disagreements"],
            ]
            if use
            else ["", "", "", "", "", ""]
        )
        writer.writerow(
            [
                _cell(u["user"]),
                _cell(" ".join(u["groups"])),
                f"{u['today_usd']:.6f}",
                f"{u['month_usd']:.6f}",
                len(u["running"]),
                f"{sum(s['usd_per_hour'] for s in u['running']):.6f}",
                f"{u['budget_share']:.4f}",
                *split,
                _cell("; ".join(s["gpus"] for s in u["running"])),
                u["interruptions"]["count"],
                f"{u['interruptions']['lost_usd']:.6f}",
                *(billed.row(u["user"]) if billed else ["", "", ""]),
            ]
        )
    if billed is not None:
        writer.writerow([UNALLOCATED, *[""] * 15, *billed.unallocated_row()])
    return out.getvalue()


def _cell(text: str) -> str:
    # a spreadsheet must not run a formula from a user or group name
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def bars(daily: list[wire.ChartDay], width: int = 1100, height: int = 140) -> dict[str, object]:
    """An SVG bar chart's geometry for a series of days (drawn by the page's template)."""
    top = max((d["usd"] for d in daily), default=0.0) or 1.0
    step = width / max(len(daily), 1)
    return {
        "width": width,
        "height": height,
        "top_usd": top,
        "bars": [
            {
                "x": round(i * step + 1, 2),
                "w": round(max(step - 2, 1), 2),
                "h": round(d["usd"] / top * (height - 20), 2),
                "y": round(height - 16 - d["usd"] / top * (height - 20), 2),
                "day": d["day"],
                "usd": d["usd"],
            }
            for i, d in enumerate(daily)
        ],
    }
