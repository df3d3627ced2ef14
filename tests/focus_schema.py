"""A FOCUS 1.2 Cost and Usage schema check of an export, read back with pyarrow: the
specification's mandatory columns, their types, nullability and allowed values (the FinOps
Foundation's ``focus-validator`` 2.x needs Python 3.12 or later, which is not installable
here: no Debian package, no PyPI interpreter)."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

from focus_bills import COLUMNS_1_2

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
MONEY = ("BilledCost", "ContractedCost", "EffectiveCost", "ListCost")
TIMES = ("BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart")
CHARGE_CATEGORIES = {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
CHARGE_FREQUENCIES = {"One-Time", "Recurring", "Usage-Based"}
PRICING_CATEGORIES = {"Standard", "Dynamic", "Committed", "Other"}
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
DIMENSIONS = ("x_User", "x_Group", "x_Notebook", "x_Kernel", "x_Profile")


def read_focus(path: Path) -> list[dict[str, object]]:
    """The export's rows, checked against FOCUS 1.2 (see the module); CSV values as text,
    Parquet's typed."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        table = pq.read_table(path)
        for name in MONEY:
            assert pa.types.is_decimal(table.schema.field(name).type), name
        for name in TIMES:
            kind = table.schema.field(name).type
            assert pa.types.is_timestamp(kind), (name, kind)
            assert kind.tz == "UTC", (name, kind)
    else:
        # every column as text, as a FOCUS reader sees a CSV before typing it
        table = pacsv.read_csv(
            path,
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in COLUMNS_1_2 + list(DIMENSIONS)},
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,  # a user called "NA" is not a null
            ),
        )
    rows: list[dict[str, object]] = table.to_pylist()
    columns = set(table.column_names)
    assert set(MANDATORY_1_2) <= columns, set(MANDATORY_1_2) - columns
    assert set(DIMENSIONS) <= columns
    # every other column is one FOCUS 1.2 names (as the clouds' sample has them) or ours
    assert {c for c in columns if not c.startswith("x_")} <= set(COLUMNS_1_2)
    for row in rows:
        assert all(row[c] not in (None, "") for c in NOT_NULL), row
        assert row["ChargeClass"] in (None, "", "Correction")
        assert row["ChargeCategory"] in CHARGE_CATEGORIES
        assert row["ChargeFrequency"] in CHARGE_FREQUENCIES
        assert row["PricingCategory"] in PRICING_CATEGORIES
        assert row["ServiceCategory"] in SERVICE_CATEGORIES
        assert re.fullmatch(r"[A-Z]{3}", str(row["BillingCurrency"]))
        assert row["PricingCurrency"] == row["BillingCurrency"]
        if path.suffix != ".parquet":
            for name in TIMES:
                assert ISO_Z.fullmatch(str(row[name])), (name, row[name])
            for name in (*MONEY, "PricingQuantity", "ConsumedQuantity"):
                row[name] = Decimal(str(row[name]))
        assert row["ChargePeriodStart"] < row["ChargePeriodEnd"]  # type: ignore[operator]
        for name in MONEY:
            assert Decimal(str(row[name])) >= 0
        tags = json.loads(str(row["Tags"]))
        assert isinstance(tags, dict)
        assert all(isinstance(v, str | int | float | bool) or v is None for v in tags.values())
        # our dimensions: the same keys in Tags as in their columns, where known
        for name in DIMENSIONS:
            assert tags.get(name) == (row[name] or None), (name, row)
    return rows
