"""Reading a FOCUS export: CSV, CSV.gz or Parquet; a file, a folder or a glob; on this
machine or in object storage (``s3://``, ``gs://``, ``az://``, through fsspec).

pyarrow streams each file in batches (the memory is bounded by a batch, not by the file)
and keeps only the rows whose ``ResourceId`` ends with a name one of the ledger's machines
may have; every other row is counted and dropped. Of the rows kept:

* an exact duplicate (the same charge, the same amounts, the same file) counts once;
* a charge (resource, period, category, class, SKU price) that a file later in path order
  holds again is a revision: the later file's rows replace the earlier ones, never add.

A file that is not a FOCUS export (a column missing), or that cannot be read to its end (a
truncated or damaged file), is refused by name with :class:`BillError`, before anything is
kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

from ..core.focus import CHARGE_KEY_COLUMNS, QUANTITY_COLUMNS, REQUIRED_COLUMNS
from ..core.i18n import _

#: the file names read from a folder or a glob
SUFFIXES = (".csv", ".csv.gz", ".parquet")
#: rows per batch read
BATCH_ROWS = 131_072


class BillError(Exception):
    """A bill that cannot be reconciled; the message says why, naming the file."""


@dataclass(frozen=True)
class BillRow:
    """One charge of a machine-like resource, as the bill says it."""

    resource_id: str
    start: datetime
    end: datetime
    billed: Decimal
    effective: Decimal
    list: Decimal
    currency: str
    #: what tells this charge from another of the same resource and period
    charge: tuple[str, ...]
    #: ``ConsumedQuantity`` and ``ConsumedUnit`` (else ``PricingUnit``), where the file has
    #: them (a scale set's row: its instances' hours)
    quantity: Decimal | None = None
    unit: str = ""


@dataclass
class Bill:
    """What was read: the candidate rows, and counts of the rest."""

    rows: list[BillRow] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    rows_read: int = 0
    #: rows for other resources (not a machine of the ledger)
    ignored: int = 0
    duplicates: int = 0
    #: rows replaced by a later file's revision of the same charge
    revised: int = 0
    #: the end of the bill's newest charge
    newest_end: datetime | None = None


def _fs_and_paths(source: str, options: dict[str, str]) -> tuple[object, str, list[str]]:
    try:
        import fsspec
    except ImportError as e:  # pragma: no cover - fsspec comes with the server
        raise BillError(str(e)) from e
    try:
        fs, path = fsspec.core.url_to_fs(source, **options)
    except (ImportError, ValueError) as e:
        raise BillError(
            _("cannot open {source}: {why} (install the file system's fsspec package)").format(
                source=source, why=e
            )
        ) from e
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    try:
        if any(ch in path for ch in "*?["):
            paths = [str(p) for p in fs.glob(path)]
        elif fs.isdir(path):
            paths = [str(p) for p in fs.find(path)]
        elif fs.exists(path):
            paths = [path]
        else:
            raise BillError(_("no bill at {source}").format(source=source))
    except OSError as e:
        raise BillError(_("cannot read {source}: {why}").format(source=source, why=e)) from e
    paths = sorted(p for p in paths if p.lower().endswith(SUFFIXES))
    if not paths:
        raise BillError(
            _("no FOCUS file (.csv, .csv.gz, .parquet) at {source}").format(source=source)
        )
    return fs, protocol, paths


def _arrow_fs(fs: object, protocol: str) -> object:
    from pyarrow import fs as pafs

    if protocol in ("file", "local"):
        return pafs.LocalFileSystem()
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs))


def _dataset(path: str, filesystem: object) -> object:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.dataset as ds

    if path.lower().endswith(".parquet"):
        return ds.dataset(path, format="parquet", filesystem=filesystem)
    strings = {name: pa.string() for name in (*REQUIRED_COLUMNS, *CHARGE_KEY_COLUMNS)}
    csv = ds.CsvFileFormat(
        convert_options=pacsv.ConvertOptions(
            column_types=strings, null_values=["", "NULL"], strings_can_be_null=True
        )
    )
    return ds.dataset(path, format=csv, filesystem=filesystem)


def _moment(value: object, what: str) -> datetime:
    """A FOCUS date-time (ISO 8601, ``Z`` or none: UTC; a Parquet timestamp)."""
    if isinstance(value, datetime):
        moment = value
    else:
        text = str(value).strip().replace(" ", "T")
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        head, dot, rest = text.partition(".")
        if dot:  # Azure writes 7 decimals: Python reads 6
            digits = "".join(ch for ch in rest if ch.isdigit())
            text = f"{head}.{digits[:6]}{rest[len(digits) :]}"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError as e:
            raise BillError(
                _("{what}: not a date and time: {value!r}").format(what=what, value=value)
            ) from e
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _amount(value: object, what: str) -> Decimal:
    if value is None:
        return Decimal(0)
    try:
        amount = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except InvalidOperation as e:
        raise BillError(_("{what}: not an amount: {value!r}").format(what=what, value=value)) from e
    if not amount.is_finite():
        raise BillError(_("{what}: not an amount: {value!r}").format(what=what, value=value))
    return amount


def _batches(dataset: object, columns: list[str]) -> Iterator[object]:
    yield from dataset.to_batches(columns=columns, batch_size=BATCH_ROWS)  # type: ignore[attr-defined]


def read_bill(
    source: str, last_parts: Iterable[str], options: dict[str, str] | None = None
) -> Bill:
    """Read ``source``, keeping the rows whose ``ResourceId``'s last part (lower case) is
    one of ``last_parts``. Raises :class:`BillError`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    fs, protocol, paths = _fs_and_paths(source, dict(options or {}))
    filesystem = _arrow_fs(fs, protocol)
    wanted = pa.array(sorted({p.lower() for p in last_parts}), type=pa.string())
    bill = Bill()
    #: charge -> (file index, rows): the latest file's rows of each charge
    charges: dict[tuple[str, ...], tuple[int, set[BillRow]]] = {}
    for index, path in enumerate(paths):
        shown = f"{protocol}://{path}" if protocol not in ("file", "local") else path
        bill.files.append(shown)
        try:
            dataset = _dataset(path, filesystem)
            names = set(dataset.schema.names)  # type: ignore[attr-defined]
            missing = [c for c in REQUIRED_COLUMNS if c not in names]
            if missing:
                raise BillError(
                    _(
                        "{file} is not a FOCUS export: it has no column {missing} "
                        "(FOCUS 1.0–1.2 names them; its columns: {found})"
                    ).format(
                        file=shown, missing=", ".join(missing), found=", ".join(sorted(names))[:400]
                    )
                )
            keys = [c for c in CHARGE_KEY_COLUMNS if c in names]
            extra = [c for c in QUANTITY_COLUMNS if c in names]
            columns = [*REQUIRED_COLUMNS, *keys, *extra]
            for batch in _batches(dataset, columns):
                rows = batch.num_rows  # type: ignore[attr-defined]
                bill.rows_read += rows
                ends = batch.column("ChargePeriodEnd")  # type: ignore[attr-defined]
                newest = pc.max(ends).as_py()
                if newest is not None:
                    moment = _moment(newest, shown)
                    if bill.newest_end is None or moment > bill.newest_end:
                        bill.newest_end = moment
                rid = pc.cast(batch.column("ResourceId"), pa.string())  # type: ignore[attr-defined]
                last = pc.utf8_lower(
                    pc.replace_substring_regex(rid, pattern=r"^.*/", replacement="")
                )
                mask = pc.fill_null(pc.is_in(last, value_set=wanted), False)
                kept = batch.filter(mask).to_pylist()  # type: ignore[attr-defined]
                bill.ignored += rows - len(kept)
                for row in kept:
                    _keep(bill, charges, index, row, keys, shown)
        except BillError:
            raise
        except (pa.ArrowException, OSError, EOFError, ValueError) as e:
            raise BillError(
                _("{file} cannot be read to its end (truncated or damaged?): {why}").format(
                    file=shown, why=e
                )
            ) from e
    for _index, rows in charges.values():
        bill.rows.extend(rows)
    bill.rows.sort(key=lambda r: (r.resource_id, r.start, r.charge, r.billed))
    return bill


def _keep(
    bill: Bill,
    charges: dict[tuple[str, ...], tuple[int, set[BillRow]]],
    index: int,
    row: dict[str, object],
    keys: list[str],
    shown: str,
) -> None:
    what = f"{shown}, {row.get('ResourceId')}"
    quantity = row.get("ConsumedQuantity")
    unit = str(row.get("ConsumedUnit") or row.get("PricingUnit") or "").strip()
    kept = BillRow(
        resource_id=str(row["ResourceId"]),
        start=_moment(row["ChargePeriodStart"], what),
        end=_moment(row["ChargePeriodEnd"], what),
        billed=_amount(row["BilledCost"], what),
        effective=_amount(row["EffectiveCost"], what),
        list=_amount(row["ListCost"], what),
        currency=str(row["BillingCurrency"] or "").strip().upper(),
        charge=tuple(str(row.get(k) or "") for k in keys),
        quantity=None if quantity in (None, "") else _amount(quantity, what),
        unit=unit,
    )
    charge = (kept.resource_id.lower(), kept.start.isoformat(), kept.end.isoformat(), *kept.charge)
    seen = charges.get(charge)
    if seen is None or seen[0] < index:
        if seen is not None:
            bill.revised += len(seen[1])
        charges[charge] = (index, {kept})
    elif kept in seen[1]:
        bill.duplicates += 1
    else:
        seen[1].add(kept)
