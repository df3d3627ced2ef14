"""FOCUS bills for the tests: the real sample rows under ``tests/data/focus`` and rows for
the tests' own stand-in machines, written as each cloud's FOCUS export writes them."""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

DATA = Path(__file__).parent / "data" / "focus"
SAMPLES = sorted(DATA.glob("*.csv"))
#: the FOCUS 1.2 columns, as the sample files of the three clouds have them
with (DATA / "focus-1.2-aws.csv").open(newline="") as _f:
    COLUMNS_1_2 = next(csv.reader(_f))


@dataclass(frozen=True)
class StandIn:
    """A machine of the tests, as its cloud's bill names it."""

    provider_name: str
    resource_id: str
    instance_type: str
    region: str
    list_per_hour: Decimal
    #: billed ÷ list (a negotiated discount, a Savings Plan's rate)
    discount: Decimal
    currency: str = "USD"


#: an EC2 g5.xlarge billed at 0.72 × list (AWS writes the instance id)
EC2_G5 = StandIn(
    "AWS", "i-0a5b7c9d1e3f50000", "g5.xlarge", "us-east-1", Decimal("1.006"), Decimal("0.72")
)
#: an Azure NC A100 VM (the exports write the resource id in lower case)
AZURE_NC = StandIn(
    "Microsoft",
    "/subscriptions/8f6c2d1e-0000-4000-8000-000000000042/resourcegroups/rg-ml"
    "/providers/microsoft.compute/virtualmachines/nc-a100-1",
    "Standard_NC24ads_A100_v4",
    "eastus",
    Decimal("3.673"),
    Decimal("1"),
)
#: a GCP a2 VM (the FOCUS view of the billing export: the resource's global name)
GCP_A2 = StandIn(
    "Google Cloud",
    "//compute.googleapis.com/projects/my-project/zones/us-central1-a/instances/train-a2",
    "a2-highgpu-1g",
    "us-central1",
    Decimal("3.673385"),
    Decimal("0.9"),
)


def hourly_rows(machine: StandIn, start: datetime, hours: int) -> list[dict[str, str]]:
    """One usage row per hour of the machine's compute, from ``start``."""
    rows = []
    for h in range(hours):
        begin = start + timedelta(hours=h)
        billed = (machine.list_per_hour * machine.discount).quantize(Decimal("0.000001"))
        row = dict.fromkeys(COLUMNS_1_2, "")
        row.update(
            ProviderName=machine.provider_name,
            PublisherName=machine.provider_name,
            InvoiceIssuerName=machine.provider_name,
            BillingPeriodStart=begin.replace(day=1, hour=0).strftime("%Y-%m-%dT%H:%M:%SZ"),
            BillingPeriodEnd=(begin.replace(day=1, hour=0) + timedelta(days=32))
            .replace(day=1)
            .strftime("%Y-%m-%dT%H:%M:%SZ"),
            ChargePeriodStart=begin.strftime("%Y-%m-%dT%H:%M:%SZ"),
            ChargePeriodEnd=(begin + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            ChargeCategory="Usage",
            ChargeDescription=f"{machine.instance_type} instance hour",
            ChargeFrequency="Usage-Based",
            BilledCost=str(billed),
            EffectiveCost=str(billed),
            ListCost=str(machine.list_per_hour),
            ListUnitPrice=str(machine.list_per_hour),
            PricingCategory="Standard",
            PricingQuantity="1",
            PricingUnit="Hours",
            PricingCurrency=machine.currency,
            BillingCurrency=machine.currency,
            ConsumedQuantity="1",
            ConsumedUnit="Hours",
            ServiceCategory="Compute",
            SkuId=f"SKU-{machine.instance_type}",
            SkuPriceId=f"SKUPRICE-{machine.instance_type}",
            ResourceId=machine.resource_id,
            ResourceName=machine.resource_id.rsplit("/", 1)[-1],
            RegionId=machine.region,
        )
        rows.append(row)
    return rows


def write_csv(path: Path, rows: Iterable[dict[str, str]], *, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if gz else open
    with opener(path, "wt", newline="") as f:  # type: ignore[operator]
        writer = csv.DictWriter(f, fieldnames=COLUMNS_1_2)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_parquet(path: Path, rows: list[dict[str, str]]) -> Path:
    """Parquet as the clouds write it: costs as decimals, times as timestamps."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def column(name: str) -> pa.Array:
        values = [r[name] for r in rows]
        if name.endswith("Cost"):
            return pa.array([Decimal(v) if v else None for v in values], pa.decimal128(38, 10))
        if name.startswith(("ChargePeriod", "BillingPeriod")):
            return pa.array(
                [datetime.fromisoformat(v.replace("Z", "+00:00")) for v in values],
                pa.timestamp("us", tz="UTC"),
            )
        return pa.array([v or None for v in values], pa.string())

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({n: column(n) for n in COLUMNS_1_2}), path)
    return path


def day_start(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)
