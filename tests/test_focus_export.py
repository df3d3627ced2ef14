"""``jupyter gpucost export-focus``: the ledger as a FOCUS 1.2 dataset, checked against the
specification's mandatory columns, types and values (the FinOps Foundation's validator
needs Python 3.12 or later: ``focus-validator`` 2.x is not installable here), and read back
by the reconcile reader."""

from __future__ import annotations

import csv
import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from focus_bills import COLUMNS_1_2

from jupyter_gpucost.core.machine import Machine
from jupyter_gpucost.reconcile.export import main
from jupyter_gpucost.reconcile.read import read_bill
from jupyter_gpucost.server.ledger import Ledger

#: FOCUS 1.2 Cost and Usage: the columns whose Feature Level is Mandatory
MANDATORY_1_2 = (
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ContractedCost",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "ServiceCategory",
    "ServiceName",
)
#: mandatory and never null (ChargeClass is null but for corrections)
NOT_NULL = tuple(c for c in MANDATORY_1_2 if c != "ChargeClass")
CHARGE_CATEGORIES = {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
SERVICE_CATEGORIES = {
    "AI and Machine Learning",
    "Analytics",
    "Business Applications",
    "Compute",
    "Databases",
    "Developer Tools",
    "Multicloud",
    "Identity",
    "Integration",
    "Internet of Things",
    "Management and Governance",
    "Media",
    "Migration",
    "Mobile",
    "Networking",
    "Security",
    "Storage",
    "Web",
    "Other",
}
ISO_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def ledger(url: str) -> tuple[str, int]:
    """Two sessions of two users on a detected g5.xlarge and on no known machine."""
    book = Ledger(url)
    start = datetime(2026, 11, 24, 10, 30, tzinfo=UTC)
    total = 0
    for n, user in enumerate(("alice", "bob")):
        spend = [(int(start.timestamp()) + 60 * m, 16_766 + n, 0, 0) for m in range(90)]
        total += sum(r[1] for r in spend)
        book.add_run(f"s{n}", start, start + timedelta(minutes=90), user, spend, [])
    book.record_machine(
        "s0",
        Machine(
            "aws", instance_type="g5.xlarge", region="us-east-1", instance_id="i-0a5b7c9d1e3f50000"
        ),
        "USD",
    )
    book.close()
    return url, total


@pytest.mark.parametrize("name", ["focus.csv", "focus.parquet"])
def test_the_export_is_focus_1_2_and_adds_up_to_the_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, ledger_url: str
) -> None:
    # from a SQLite file and from a real PostgreSQL database
    url, total = ledger(ledger_url)
    out = tmp_path / "out" / name
    assert main([str(out), "--ledger", url]) == 0
    assert "4 FOCUS rows written" in capsys.readouterr().out  # 2 sessions × 2 hours
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(out)
        rows = table.to_pylist()
        assert str(table.schema.field("BilledCost").type).startswith("decimal128")
        # Parquet keeps times in milliseconds at the least
        assert str(table.schema.field("ChargePeriodStart").type) == "timestamp[ms, tz=UTC]"
    else:
        with out.open(newline="") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            for column in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart"):
                assert ISO_Z.fullmatch(row[column]), (column, row[column])
            Decimal(row["BilledCost"])
    columns = set(rows[0])
    assert set(MANDATORY_1_2) <= columns
    # every other column is one FOCUS 1.2 names (as the clouds' sample has them) or ours
    assert {c for c in columns if not c.startswith("x_")} <= set(COLUMNS_1_2)
    for row in rows:
        assert all(row[c] not in (None, "") for c in NOT_NULL), row
        assert row["ChargeCategory"] in CHARGE_CATEGORIES
        assert row["ServiceCategory"] in SERVICE_CATEGORIES
        assert re.fullmatch(r"[A-Z]{3}", str(row["BillingCurrency"]))
        assert json.loads(str(row["Tags"]))["user"] == row["x_User"]
    by_user = {r["x_User"] for r in rows}
    assert by_user == {"alice", "bob"}
    machine_rows = [r for r in rows if r["ResourceId"] == "i-0a5b7c9d1e3f50000"]
    assert {r["x_InstanceType"] for r in machine_rows} == {"g5.xlarge"}
    assert {r["ProviderName"] for r in machine_rows} == {"AWS"}

    # read back by the reconcile reader: the same money, to the micro-unit
    bill = read_bill(str(out), {"i-0a5b7c9d1e3f50000", "s1"})
    assert bill.rows_read == 4
    assert sum(r.billed for r in bill.rows) * 1_000_000 == total


def test_since_keeps_the_later_hours(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    out = tmp_path / "focus.csv"
    assert main([str(out), "--ledger", url, "--since", "2026-11-25"]) == 0
    assert "0 FOCUS rows written" in capsys.readouterr().out
