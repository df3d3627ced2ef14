"""The one writer of our costs as a FOCUS 1.2 Cost and Usage dataset (showback), for the
single server's ledger (``jupyter gpucost export-focus``) and the hub's
(``python -m jupyter_gpucost.hub export-focus``): each gives :class:`Charge` rows, this
module turns them into FOCUS columns and writes them.

* Money is the ledger's integer micro-units in the ledger's currency (``BillingCurrency``;
  never assumed to be USD), written as exact decimals.
* Times are UTC (FOCUS: ISO 8601 with a ``Z`` in CSV, ``timestamp[UTC]`` in Parquet).
* Our dimensions are custom columns (``x_User``, ``x_Group``, ``x_Notebook``, ``x_Kernel``,
  ``x_Profile``; empty where the ledger does not know them) and the same keys in ``Tags``
  (a JSON object of strings, as FOCUS 1.2 defines it, with only the keys that are known,
  and the session and instance type).
* ``x_PriceBasis`` says what the cost is priced from.
* ``OUT`` ending in ``.parquet`` is Parquet, in ``.csv`` CSV; anything else is refused. The
  file is written beside ``OUT`` under a temporary name and renamed when complete, so a
  failed export leaves nothing behind, and an existing file is replaced whole or not at all.

May import: ``jupyter_gpucost.core`` (pyarrow when writing).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from ..core.i18n import _
from ..core.money import to_units

#: what the providers are called in FOCUS's ``ProviderName`` (the clouds' own exports)
PROVIDER_NAMES = {"aws": "AWS", "azure": "Microsoft", "gcp": "Google Cloud"}
#: our dimensions: custom columns, and the same keys in ``Tags``
DIMENSIONS = ("x_User", "x_Group", "x_Notebook", "x_Kernel", "x_Profile")
#: the FOCUS 1.2 columns written, the spec's ones first, then ours (``x_``)
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
    *DIMENSIONS,
    "x_PriceBasis",
    "x_SessionId",
    "x_Provider",
    "x_InstanceType",
)
#: the columns holding money, numbers and date-times
MONEY = ("BilledCost", "ContractedCost", "EffectiveCost", "ListCost")
NUMBERS = ("ConsumedQuantity", "PricingQuantity")
TIMES = ("BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart")
#: what ``OUT`` may end in, and the format written
FORMATS = {".csv": "csv", ".parquet": "parquet"}


class ExportRefused(Exception):
    """``OUT`` cannot be written (the message says why); nothing was left behind."""


@dataclass(frozen=True)
class Charge:
    """What one session cost over one charge period, with who and what it was for.

    ``cost`` and ``list_cost`` are micro-units of ``currency``; dimensions the ledger does
    not know are ``""``."""

    start: datetime
    end: datetime
    cost: int
    list_cost: int
    currency: str
    price_basis: str
    hours: Decimal
    session: str
    resource_id: str
    resource_type: str
    user: str = ""
    group: str = ""
    notebook: str = ""
    kernel: str = ""
    profile: str = ""
    provider: str = ""
    instance_type: str = ""
    region: str = ""


def _month(moment: datetime) -> tuple[datetime, datetime]:
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, (start + timedelta(days=32)).replace(day=1)


def tags(charge: Charge) -> dict[str, str]:
    """Our dimensions as FOCUS ``Tags``, keyed like their columns (``x_``: FOCUS wants a
    provider's own tag keys prefixed): only the keys the ledger knows a value of."""
    values = {**dimensions(charge), "x_SessionId": charge.session}
    values["x_InstanceType"] = charge.instance_type
    return {key: value for key, value in values.items() if value}


def dimensions(charge: Charge) -> dict[str, str]:
    return {
        "x_User": charge.user,
        "x_Group": charge.group,
        "x_Notebook": charge.notebook,
        "x_Kernel": charge.kernel,
        "x_Profile": charge.profile,
    }


def focus_row(charge: Charge) -> dict[str, object]:
    """One charge as a FOCUS 1.2 row (money as Decimal, times as UTC datetimes)."""
    start, end = charge.start.astimezone(UTC), charge.end.astimezone(UTC)
    period_start, period_end = _month(start)
    cost, listed = to_units(charge.cost), to_units(charge.list_cost)
    resource = charge.resource_id or charge.session
    what = charge.instance_type or charge.profile or "this machine"
    return {
        "BilledCost": cost,
        "BillingAccountId": "jupyter-gpucost",
        "BillingAccountName": "jupyter-gpucost showback",
        "BillingCurrency": charge.currency,
        "BillingPeriodEnd": period_end,
        "BillingPeriodStart": period_start,
        "ChargeCategory": "Usage",
        "ChargeClass": None,
        "ChargeDescription": f"GPU notebook session on {what}",
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodEnd": end,
        "ChargePeriodStart": start,
        "ConsumedQuantity": charge.hours,
        "ConsumedUnit": "Hours",
        "ContractedCost": cost,
        "EffectiveCost": cost,
        "InvoiceIssuerName": "jupyter-gpucost",
        "ListCost": listed,
        "PricingCategory": "Standard",
        "PricingCurrency": charge.currency,
        "PricingQuantity": charge.hours,
        "PricingUnit": "Hours",
        "ProviderName": PROVIDER_NAMES.get(charge.provider, charge.provider or "jupyter-gpucost"),
        "PublisherName": "jupyter-gpucost",
        "RegionId": charge.region or None,
        "RegionName": charge.region or None,
        "ResourceId": resource,
        "ResourceName": resource.rsplit("/", 1)[-1],
        "ResourceType": charge.resource_type,
        "ServiceCategory": "AI and Machine Learning",
        "ServiceName": "Jupyter notebooks",
        "ServiceSubcategory": "Machine Learning",
        "SubAccountId": charge.user or None,
        "SubAccountName": charge.user or None,
        "Tags": json.dumps(tags(charge), sort_keys=True),
        **{k: v or None for k, v in dimensions(charge).items()},
        "x_PriceBasis": charge.price_basis,
        "x_SessionId": charge.session,
        "x_Provider": charge.provider or None,
        "x_InstanceType": charge.instance_type or None,
    }


def out_format(path: Path, keep_off: tuple[Path, ...] = ()) -> str:
    """The format ``path`` is written in, or :class:`ExportRefused` when it cannot be an
    export: another extension, a folder, under a file, or one of ``keep_off`` (the ledger
    itself)."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ExportRefused(
            _("{out}: name the file .csv or .parquet (the format is chosen by it)").format(out=path)
        )
    if path.is_dir():
        raise ExportRefused(_("{out} is a folder: name the file to write").format(out=path))
    above = next((p for p in path.absolute().parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise ExportRefused(
            _("cannot write {out}: {file} is a file, not a folder").format(out=path, file=above)
        )
    target = path.resolve()
    if any(target == p.resolve() for p in keep_off):
        raise ExportRefused(
            _("{out} is the ledger itself: write the export to another file").format(out=path)
        )
    return fmt


def write_focus(path: Path, charges: list[Charge], keep_off: tuple[Path, ...] = ()) -> None:
    """Write ``charges`` as FOCUS rows to ``path`` (see the module), whole or not at all."""
    fmt = out_format(path, keep_off)
    table = _table([focus_row(c) for c in charges], fmt)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    except OSError as e:
        raise ExportRefused(
            _("cannot write {out}: {why}").format(out=path, why=e.strerror or e)
        ) from None
    os.close(fd)
    part = Path(name)
    try:
        _write(table, part, fmt)
        os.replace(part, path)
    except OSError as e:
        raise ExportRefused(
            _("cannot write {out}: {why}").format(out=path, why=e.strerror or e)
        ) from None
    finally:
        part.unlink(missing_ok=True)


def _table(rows: list[dict[str, object]], fmt: str) -> object:
    import pyarrow as pa

    def column(name: str) -> object:
        values = [r[name] for r in rows]
        if name in MONEY or name in NUMBERS:
            return pa.array(values, pa.decimal128(38, 10))
        if name in TIMES:
            if fmt == "csv":  # FOCUS's form: ISO 8601 in UTC with a Z
                return pa.array(
                    [None if v is None else f"{v:%Y-%m-%dT%H:%M:%SZ}" for v in values],
                    pa.string(),
                )
            return pa.array(values, pa.timestamp("s", tz="UTC"))
        return pa.array(values, pa.string())

    return pa.table({name: column(name) for name in COLUMNS})


def _write(table: object, part: Path, fmt: str) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    assert isinstance(table, pa.Table)
    if fmt == "parquet":
        pq.write_table(table, part)
    else:
        pacsv.write_csv(table, part)
