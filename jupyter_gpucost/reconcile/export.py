"""``jupyter gpucost export-focus OUT [--since DATE] [--ledger URL]``: the ledger as a FOCUS
1.2 Cost and Usage dataset (showback), for FinOps tools that ingest FOCUS.

One row per session and hour: the cost the ledger counted (``BilledCost`` = ``EffectiveCost``
= ``ListCost`` = ``ContractedCost``: it is our estimate, priced as the server priced it),
the machine as the resource (its provider's id, type and region), and our dimensions as
custom columns (``x_User``, ``x_SessionId``, ``x_InstanceType``, ``x_Provider``) and in
``Tags``. ``OUT`` ending in ``.parquet`` is written as Parquet, anything else as CSV.

Exit codes: 0 written, 2 the command line is wrong, 6 the ledger cannot be used.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from ..core.i18n import _
from ..core.money import to_usd
from ..server.ledger import Ledger, LedgerUnavailable, SessionHour
from .cli import Parser, ledger_url

EXIT_OK = 0
EXIT_LEDGER = 6

#: what the providers are called in FOCUS's ``ProviderName`` (the clouds' own exports)
PROVIDER_NAMES = {"aws": "AWS", "azure": "Microsoft", "gcp": "Google Cloud"}
#: the FOCUS 1.2 columns written, the spec's mandatory ones first, then ours (``x_``)
COLUMNS = (
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "PricingCategory",
    "PricingCurrency",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SubAccountId",
    "SubAccountName",
    "Tags",
    "x_User",
    "x_SessionId",
    "x_Provider",
    "x_InstanceType",
)
#: the columns holding money, and those holding date-times
MONEY = ("BilledCost", "ContractedCost", "EffectiveCost", "ListCost")
TIMES = ("BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart")
NUMBERS = ("ConsumedQuantity", "PricingQuantity")


def _month(moment: datetime) -> tuple[datetime, datetime]:
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, (start + timedelta(days=32)).replace(day=1)


def focus_row(hour: SessionHour) -> dict[str, object]:
    """One session-hour as a FOCUS 1.2 row (money as Decimal, times as UTC datetimes)."""
    start = datetime.fromtimestamp(hour.hour_unix_s, UTC)
    period_start, period_end = _month(start)
    machine = hour.machine
    provider = machine.provider if machine is not None else ""
    resource = (machine.key if machine is not None else "") or hour.session_id
    cost = to_usd(hour.cost)
    hours = (Decimal(hour.minutes) / 60).quantize(Decimal("0.000001"))
    currency = hour.currency or "USD"
    instance_type = machine.instance_type if machine is not None else ""
    tags = {"user": hour.user or "", "session": hour.session_id}
    if instance_type:
        tags["instance_type"] = instance_type
    return {
        "BilledCost": cost,
        "BillingAccountId": "jupyter-gpucost",
        "BillingAccountName": "jupyter-gpucost showback",
        "BillingCurrency": currency,
        "BillingPeriodEnd": period_end,
        "BillingPeriodStart": period_start,
        "ChargeCategory": "Usage",
        "ChargeClass": None,
        "ChargeDescription": f"GPU notebook session on {instance_type or 'this machine'}",
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodEnd": start + timedelta(hours=1),
        "ChargePeriodStart": start,
        "ConsumedQuantity": hours,
        "ConsumedUnit": "Hours",
        "ContractedCost": cost,
        "EffectiveCost": cost,
        "InvoiceIssuerName": "jupyter-gpucost",
        "ListCost": cost,
        "PricingCategory": "Standard",
        "PricingCurrency": currency,
        "PricingQuantity": hours,
        "PricingUnit": "Hours",
        "ProviderName": PROVIDER_NAMES.get(provider, provider or "jupyter-gpucost"),
        "PublisherName": "jupyter-gpucost",
        "RegionId": (machine.region if machine is not None else "") or None,
        "RegionName": (machine.region if machine is not None else "") or None,
        "ResourceId": resource,
        "ResourceName": resource.rsplit("/", 1)[-1],
        "ResourceType": "Jupyter server session",
        "ServiceCategory": "AI and Machine Learning",
        "ServiceName": "Jupyter notebooks",
        "ServiceSubcategory": "Machine Learning",
        "SubAccountId": hour.user,
        "SubAccountName": hour.user,
        "Tags": json.dumps(tags, sort_keys=True),
        "x_User": hour.user,
        "x_SessionId": hour.session_id,
        "x_Provider": provider or None,
        "x_InstanceType": instance_type or None,
    }


def write_focus(path: Path, rows: list[dict[str, object]]) -> None:
    """Write ``rows`` as Parquet (``.parquet``) or CSV, with FOCUS's types."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    def column(name: str) -> object:
        values = [r[name] for r in rows]
        if name in MONEY or name in NUMBERS:
            return pa.array(values, pa.decimal128(38, 10))
        if name in TIMES:
            return pa.array(values, pa.timestamp("s", tz="UTC"))
        return pa.array(values, pa.string())

    table = pa.table({name: column(name) for name in COLUMNS})
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.lower().endswith(".parquet"):
        pq.write_table(table, path)
    else:
        # times in FOCUS's form: ISO 8601 in UTC with a Z
        texts = {
            name: pa.array(
                [
                    None if v is None else v.strftime("%Y-%m-%dT%H:%M:%SZ")
                    for v in table[name].to_pylist()
                ],
                pa.string(),
            )
            for name in TIMES
        }
        for name, values in texts.items():
            table = table.set_column(table.schema.get_field_index(name), name, values)
        pacsv.write_csv(table, path)


def main(argv: Sequence[str] | None = None) -> int:
    p = Parser(
        prog="jupyter gpucost export-focus",
        description=_("Write the ledger as a FOCUS 1.2 dataset (showback)."),
    )
    p.add_argument("out", help=_("the file to write: .parquet, else CSV"))
    p.add_argument("--since", type=date.fromisoformat, help=_("only hours from DATE (YYYY-MM-DD)"))
    p.add_argument("--ledger", help=_("the ledger's URL (default: this machine's server ledger)"))
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    url = ledger_url(args.ledger)
    if not url:
        return EXIT_LEDGER
    since = (
        None
        if args.since is None
        else int(
            datetime(args.since.year, args.since.month, args.since.day, tzinfo=UTC).timestamp()
        )
    )
    try:
        ledger = Ledger(url)
        try:
            hours = ledger.session_hours(since)
        finally:
            ledger.close()
    except LedgerUnavailable as e:
        print(_("the ledger cannot be used: {why}").format(why=e), file=sys.stderr)
        return EXIT_LEDGER
    rows = [focus_row(h) for h in hours]
    write_focus(Path(args.out), rows)
    print(_("{rows} FOCUS rows written to {out}").format(rows=len(rows), out=args.out))
    return EXIT_OK
