"""The admin page, CSV and /metrics with the cloud's bill reconciled: the billed cost
beside the estimate, the unallocated (idle nodes) line and the accuracy, in English and
in Chinese; and nothing of it before a bill is reconciled."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hub_admin_page import admin_page

from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.reconciled import ReconciledLedger, ReconciledLine
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web import billed_view, metrics_view, views

TODAY = datetime.now(UTC).date()
#: two days of this month (the 1st, and today) reconciled
DAYS = sorted({TODAY.replace(day=1), TODAY})
#: the node, as its bill names it
NODE = "i-0a5b7c9d1e3f50000"


def service(tmp_path: Path, reconciled: bool) -> HubService:
    ledger = HubLedger(f"sqlite:///{tmp_path / 'hub.sqlite'}")
    svc = HubService(ledger, lambda s: None, HubBudgetPolicy(), HubEnforcer(300))  # type: ignore[arg-type, return-value]
    svc.billed = ReconciledLedger(ledger.engine)
    if reconciled:
        lines = [
            line
            for day in DAYS
            for line in (
                ReconciledLine(day, "user", "alice", 1_500_000, 1_200_000, False, NODE),
                ReconciledLine(day, "user", "bob", 500_000, 600_000, False, NODE),
                ReconciledLine(day, "unallocated", NODE, 2_000_000, 0, False, NODE),
            )
        ]
        # a line of last month is not this month's
        last = TODAY.replace(day=1) - timedelta(days=1)
        lines.append(ReconciledLine(last, "user", "alice", 9_000_000, 1, True, NODE))
        to = datetime.combine(TODAY, datetime.min.time(), UTC)
        svc.billed.replace([(d, NODE) for d in [*DAYS, last]], lines, to, to)
    return svc


def test_the_admin_page_shows_the_bill_beside_the_estimate(tmp_path: Path) -> None:
    svc = service(tmp_path, reconciled=True)
    n = len(DAYS)
    html = admin_page(svc, "en")
    assert "The cloud&#39;s bill this month" in html or "The cloud's bill this month" in html
    assert f"(your bill to {TODAY.isoformat()})" in html
    section = html[html.index('id="gpucost-billed"') :]
    assert f"${4 * n:.2f}" in section  # billed: alice, bob and the idle node
    assert f"estimated ${1.8 * n:.2f}" in section
    assert "0.45" in section  # 1.8 ÷ 4
    assert f"${2 * n:.2f}" in section  # unallocated (idle nodes)
    users = html[html.index('id="gpucost-billed-users"') :]
    assert users.index("alice") < users.index("bob") < users.index("unallocated (idle nodes)")
    chinese = admin_page(svc, "zh_CN")
    assert "未分摊（空闲节点）" in chinese  # noqa: RUF001 - the translation's own brackets
    assert "本月云账单" in chinese
    svc.ledger.close()


def test_the_csv_and_metrics_carry_the_billed_columns(tmp_path: Path) -> None:
    svc = service(tmp_path, reconciled=True)
    n = len(DAYS)
    month = billed_view.this_month(svc.billed, TODAY)
    summary = views.admin_summary(svc, datetime.now(UTC), TODAY)
    rows = list(csv.DictReader(io.StringIO(views.users_csv(summary, month))))
    idle = rows[-1]
    assert idle["user"] == "unallocated (idle nodes)"
    assert idle["billed_usd"] == f"{2 * n:.6f}"
    # the groups the Hub says they are in: each group is its members' sum
    svc.groups_of = {"alice": ("ml",), "bob": ("ml", "finance")}
    metrics = metrics_view.metrics(svc, datetime.now(UTC), TODAY)
    assert f'gpucost_hub_group_month_billed_usd{{group="ml"}} {2 * n:.6f}' in metrics
    assert f'gpucost_hub_group_month_billed_usd{{group="finance"}} {0.5 * n:.6f}' in metrics
    assert f'gpucost_hub_user_month_billed_usd{{user="alice"}} {1.5 * n:.6f}' in metrics
    assert f'gpucost_hub_user_month_billed_usd{{user="bob"}} {0.5 * n:.6f}' in metrics
    assert f"gpucost_hub_unallocated_month_usd {2 * n:.6f}" in metrics
    assert f"gpucost_hub_billed_month_usd {4 * n:.6f}" in metrics
    assert "gpucost_hub_billed_accuracy 0.450000" in metrics
    assert "gpucost_hub_billed_accuracy_last_day 0.450000" in metrics
    svc.ledger.close()


def test_nothing_is_shown_before_a_bill_is_reconciled(tmp_path: Path) -> None:
    svc = service(tmp_path, reconciled=False)
    assert 'id="gpucost-billed"' not in admin_page(svc, "en")
    assert "billed_usd" not in metrics_view.metrics(svc, datetime.now(UTC), TODAY)
    summary = views.admin_summary(svc, datetime.now(UTC), TODAY)
    text = views.users_csv(summary, billed_view.this_month(svc.billed, TODAY))
    assert "unallocated" not in text.splitlines()[-1]
    svc.ledger.close()
