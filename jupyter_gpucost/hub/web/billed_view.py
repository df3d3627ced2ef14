"""The cloud's bill beside the estimates (``python -m jupyter_gpucost.hub reconcile``,
:mod:`..reconcile`): this month's billed cost of each user, the part of the nodes' bill no
session used ("unallocated (idle nodes)"), and the accuracy of the estimate (estimated ÷
billed) per day, for the admin CSV and ``/metrics``. Nothing when no bill was reconciled.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime

from ...core.money import json_amount
from ..accounting import month_start
from ..ledger.reconciled import ReconciledLedger, Reconciliation

#: the CSV's line of the nodes' bill no session used
UNALLOCATED = "unallocated (idle nodes)"
#: the CSV's columns, after the estimates
CSV_COLUMNS = ["billed_usd", "billed_estimated_usd", "billed_accuracy"]


@dataclass
class BilledMonth:
    """This month's reconciled days: micro-dollars billed and estimated per user."""

    billed: dict[str, int] = field(default_factory=dict)
    estimated: dict[str, int] = field(default_factory=dict)
    unallocated: int = 0
    #: day → (billed, estimated) over every node
    days: dict[date, tuple[int, int]] = field(default_factory=dict)
    bill_to: datetime | None = None

    def row(self, user: str) -> list[str]:
        """A user's CSV cells (empty: nothing of the user on the bill)."""
        if user not in self.billed:
            return ["", "", ""]
        billed, estimated = self.billed[user], self.estimated.get(user, 0)
        accuracy = f"{estimated / billed:.4f}" if billed else ""
        return [f"{json_amount(billed):.6f}", f"{json_amount(estimated):.6f}", accuracy]

    def unallocated_row(self) -> list[str]:
        return [f"{json_amount(self.unallocated):.6f}", "", ""]


def billed_month(reconciliation: Reconciliation | None, today: date) -> BilledMonth | None:
    """This month's lines (``None``: no bill reconciled this month)."""
    if reconciliation is None:
        return None
    start = month_start(today)
    lines = [line for line in reconciliation.lines if start <= line.day <= today]
    if not lines:
        return None
    month = BilledMonth(bill_to=reconciliation.bill_to)
    days: dict[date, list[int]] = defaultdict(lambda: [0, 0])
    for line in lines:
        days[line.day][0] += line.billed_micro_usd
        days[line.day][1] += line.estimated_micro_usd
        if line.kind == "unallocated":
            month.unallocated += line.billed_micro_usd
        else:
            month.billed[line.name] = month.billed.get(line.name, 0) + line.billed_micro_usd
            month.estimated[line.name] = (
                month.estimated.get(line.name, 0) + line.estimated_micro_usd
            )
    month.days = {d: (b, e) for d, (b, e) in sorted(days.items())}
    return month


def this_month(billed: ReconciledLedger | None, today: date) -> BilledMonth | None:
    """This month's reconciled lines from the ledger (``None``: none)."""
    if billed is None:
        return None
    return billed_month(billed.read(month_start(today)), today)


def page(month: BilledMonth | None) -> dict[str, object] | None:
    """The admin page's section: the month's billed and estimated, accuracy, unallocated,
    each user's billed beside the estimate (dollars)."""
    if month is None:
        return None
    billed = sum(b for b, _ in month.days.values())
    estimated = sum(e for _, e in month.days.values())
    return {
        "billed_usd": json_amount(billed),
        "estimated_usd": json_amount(estimated),
        "accuracy": round(estimated / billed, 4) if billed else None,
        "unallocated_usd": json_amount(month.unallocated),
        "bill_to": month.bill_to.date().isoformat() if month.bill_to else None,
        "users": [
            {
                "user": user,
                "billed_usd": json_amount(amount),
                "estimated_usd": json_amount(month.estimated.get(user, 0)),
            }
            for user, amount in sorted(month.billed.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        "days": [
            {
                "date": day.isoformat(),
                "billed_usd": json_amount(b),
                "accuracy": round(e / b, 4) if b else None,
            }
            for day, (b, e) in sorted(month.days.items())
        ],
    }


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def gauges(
    month: BilledMonth | None,
    top_users: int,
    groups_of: Mapping[str, Iterable[str]] | None = None,
    top_groups: int = 20,
) -> list[str]:
    """``/metrics`` lines: each user's billed cost this month (the top ones, the rest as
    other), each group's (its members' sum), the unallocated part, the month's and the
    latest day's accuracy."""
    if month is None:
        return []
    lines: list[str] = []

    def gauge(name: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f"{name}{labels} {value:.6f}" for labels, value in samples)

    ranked = sorted(month.billed.items(), key=lambda kv: (-kv[1], kv[0]))
    samples = [(f'{{user="{_label(u)}"}}', json_amount(v)) for u, v in ranked[:top_users]]
    if len(ranked) > top_users:
        samples.append(('{user="other"}', json_amount(sum(v for _, v in ranked[top_users:]))))
    gauge(
        "gpucost_hub_user_month_billed_usd",
        "this month's cost on the cloud's bill allocated to the user (reconciled days)",
        samples,
    )
    by_group: dict[str, int] = defaultdict(int)
    for user, groups in (groups_of or {}).items():
        for group in set(groups):
            by_group[group] += month.billed.get(user, 0)
    ranked = sorted(by_group.items(), key=lambda kv: (-kv[1], kv[0]))
    samples = [(f'{{group="{_label(g)}"}}', json_amount(v)) for g, v in ranked[:top_groups]]
    if len(ranked) > top_groups:
        samples.append(('{group="other"}', json_amount(sum(v for _, v in ranked[top_groups:]))))
    if samples:
        gauge(
            "gpucost_hub_group_month_billed_usd",
            "this month's cost on the cloud's bill allocated to the group's members",
            samples,
        )
    gauge(
        "gpucost_hub_unallocated_month_usd",
        "this month's cost on the cloud's bill of nodes no session used (idle nodes)",
        [("", json_amount(month.unallocated))],
    )
    billed = sum(b for b, _ in month.days.values())
    estimated = sum(e for _, e in month.days.values())
    gauge(
        "gpucost_hub_billed_month_usd", "this month's reconciled bill", [("", json_amount(billed))]
    )
    if billed:
        gauge(
            "gpucost_hub_billed_accuracy",
            "estimated ÷ billed over this month's reconciled days",
            [("", estimated / billed)],
        )
    latest = max(month.days)
    day_billed, day_estimated = month.days[latest]
    if day_billed:
        gauge(
            "gpucost_hub_billed_accuracy_last_day",
            "estimated ÷ billed on the latest reconciled day",
            [("", day_estimated / day_billed)],
        )
    return lines
