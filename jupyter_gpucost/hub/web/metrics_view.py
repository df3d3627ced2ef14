"""What ``/metrics`` shows (Prometheus text), computed from the service's state: per-user
gauges for the top spenders ("other" for the rest), per group, and the running servers;
with the cluster's Prometheus, the same users' month split into used, idle and unknown;
the month's spot interruptions; with an idle policy, the idle GPU-hours and what
reclaiming saved, as the admin page shows them; the billed month. Label values stay
bounded however many users a hub has. Pure data, no tornado.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime

from ..accounting import month_start
from ..ledger.usage import UsageTotals
from ..model import UserTotals
from ..service import HubService
from .billed_view import gauges, this_month
from .idle_view import idle_gauges, idle_summary
from .views import usd

#: /metrics names this many users (the biggest spenders this month); the rest are "other"
METRICS_TOP_USERS = 50
METRICS_TOP_GROUPS = 20

#: a gauge's samples: (labels, value)
Samples = list[tuple[str, float]]


class Gauges:
    """The lines of the text, one gauge at a time."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, name: str, help_text: str, samples: Samples) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} gauge")
        self.lines.extend(f"{name}{labels} {value:.6f}" for labels, value in samples)

    def one(self, name: str, help_text: str, value: float) -> None:
        self.add(name, help_text, [("", value)])


def metrics(service: HubService, now: datetime | None = None, today: date | None = None) -> str:
    """The whole text of ``/metrics``."""
    now = now or datetime.now(UTC)
    today = today or now.date()
    out = Gauges()
    ranked = sorted(service.totals.values(), key=lambda t: (-t.month_micro_usd, t.user))
    top, rest = ranked[:METRICS_TOP_USERS], ranked[METRICS_TOP_USERS:]
    _user_spend(out, top, rest)
    _group_spend(out, service)
    _running(out, service)
    if service.cluster is not None:
        _cluster_use(out, service, today, top, bool(rest))
    _interruptions(out, service, today)
    _idle(out, service, now)
    billed = this_month(service.billed, today)
    out.lines.extend(gauges(billed, METRICS_TOP_USERS, service.groups_of, METRICS_TOP_GROUPS))
    return "\n".join(out.lines) + "\n"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _user_spend(out: Gauges, top: list[UserTotals], rest: list[UserTotals]) -> None:
    """The top spenders' month and day, the rest as ``other``."""
    for field, help_text in (
        ("month_micro_usd", "spend this month in USD (top users by spend; the rest as other)"),
        ("today_micro_usd", "spend today in USD (same users as the month's gauge)"),
    ):
        samples = [(f'{{user="{_label(t.user)}"}}', usd(getattr(t, field))) for t in top]
        if rest:
            samples.append(('{user="other"}', usd(sum(getattr(t, field) for t in rest))))
        out.add(f"gpucost_hub_user_{field.split('_')[0]}_usd", help_text, samples)


def _group_spend(out: Gauges, service: HubService) -> None:
    """Each group's pooled month, the biggest groups by name, the rest as ``other``."""
    totals = service.totals
    group_month: dict[str, int] = defaultdict(int)
    for user, groups in service.groups_of.items():
        for group in groups:
            group_month[group] += totals[user].month_micro_usd if user in totals else 0
    ranked_groups = sorted(group_month.items(), key=lambda kv: (-kv[1], kv[0]))
    samples = [(f'{{group="{_label(g)}"}}', usd(v)) for g, v in ranked_groups[:METRICS_TOP_GROUPS]]
    if len(ranked_groups) > METRICS_TOP_GROUPS:
        other = sum(v for _, v in ranked_groups[METRICS_TOP_GROUPS:])
        samples.append(('{group="other"}', usd(other)))
    out.add("gpucost_hub_group_month_usd", "a group's pooled spend this month in USD", samples)


def _running(out: Gauges, service: HubService) -> None:
    """The servers billed now, their rate, those stopping over budget, the last poll."""
    out.one("gpucost_hub_running_servers", "servers the hub bills now", float(len(service.rows)))
    rate = sum(float(r.rate.usd_per_hour) for r in service.rows.values())
    out.one("gpucost_hub_usd_per_hour", "what the running servers cost per hour", rate)
    over = sum(1 for s in service.state.values() if s.stop_at is not None)
    out.one(
        "gpucost_hub_servers_over_budget",
        "running servers with a spent budget (stopping)",
        float(over),
    )
    out.one("gpucost_hub_poll_seconds", "time of the last poll's sync", service.last_poll_s)
    for name, help_text, value in idle_gauges(service):
        out.one(name, help_text, value)


def _cluster_use(
    out: Gauges, service: HubService, today: date, top: list[UserTotals], rest: bool
) -> None:
    """The top spenders' month split by the cluster's DCGM, and whether Prometheus answers."""
    cluster = service.cluster
    assert cluster is not None
    by_user = cluster.ledger.by_user(today)
    named = {t.user for t in top}
    samples: Samples = []
    for kind in ("used", "idle", "unknown"):
        field = f"{kind}_micro_usd"
        for t in top:
            figures = by_user.get(t.user, UsageTotals())
            samples.append(
                (f'{{user="{_label(t.user)}",use="{kind}"}}', usd(getattr(figures, field)))
            )
        if rest:
            other = sum(getattr(f, field) for u, f in by_user.items() if u not in named)
            samples.append((f'{{user="other",use="{kind}"}}', usd(other)))
    out.add(
        "gpucost_hub_user_month_gpu_usd",
        "this month's allocation split by the cluster's DCGM into used, idle and unknown "
        "(same users as the month's gauge)",
        samples,
    )
    out.one(
        "gpucost_hub_prometheus_up",
        "1 while the cluster's Prometheus answers the service, else 0",
        0.0 if cluster.status.down_since is not None else 1.0,
    )


def _interruptions(out: Gauges, service: HubService, today: date) -> None:
    """This month's spot interruptions and what they lost."""
    interrupted = service.ledger.interruptions_by_user(month_start(today)).values()
    out.one(
        "gpucost_hub_interruptions_month",
        "spot interruptions this month, as the servers reported them (shown, never billed)",
        float(sum(t.count for t in interrupted)),
    )
    out.one(
        "gpucost_hub_interruptions_lost_month_usd",
        "what was computed since the last checkpoint before this month's spot interruptions",
        usd(sum(t.lost_micro_usd for t in interrupted)),
    )


def _idle(out: Gauges, service: HubService, now: datetime) -> None:
    """With an idle policy: the idle GPU-time, its cost, the servers reclaimed and what
    that saved, over the admin page's period."""
    idle = idle_summary(service, now)
    if idle is None:
        return
    days = idle["period_days"]
    for name, help_text, value in (
        (
            "gpucost_hub_idle_gpu_seconds",
            f"GPU-seconds judged idle (every GPU idle, no kernel busy), last {days} days "
            "(the admin page's idle GPU-hours × 3600)",
            idle["idle_gpu_hours"] * 3600,
        ),
        (
            "gpucost_hub_idle_usd",
            f"what the idle GPU-hours cost, last {days} days",
            idle["idle_usd"],
        ),
        (
            "gpucost_hub_reclaimed_servers",
            f"servers stopped for idle GPUs, last {days} days",
            float(idle["reclaimed"]),
        ),
        (
            "gpucost_hub_reclaim_saved_usd",
            f"what reclaiming saved (estimate), last {days} days",
            idle["saved_usd"],
        ),
    ):
        out.one(name, help_text, float(value))
