"""Regenerate the catalog's Azure rows from Azure's Retail Prices API (no credentials).

    python scripts/azure_prices.py                    # print the new Azure rows
    python scripts/azure_prices.py --write            # rewrite jupyter_gpucost/data/prices.toml
    python scripts/azure_prices.py --region westeurope --catalog my.toml --write
    python scripts/azure_prices.py --all-regions --write   # every region that sells them

For every Azure size the catalog prices (its ``[[instance]]`` rows and the instances of its
``[[price]]`` rows), asks the feed for the region's Linux pay-as-you-go and Spot prices and
writes them as ``listed`` rows dated today, naming the feed's meter and the date the price
took effect: each on-demand ``[[instance]]`` row is replaced, a Spot row follows it, and
each ``[[price]]`` row gets its size's price divided by its GPUs (rounded up to the
micro-dollar). The catalog's other providers, its comments and its order are kept. A size
the feed does not list is kept as it was and named on stderr (exit 1); a size marked
``not_for_sale`` is kept and not asked for. Exit 2 when the feed cannot be read.

``--all-regions`` asks for every Azure size of the catalog (in any region) in every region
the feed sells it: each region's rows are rewritten as above, and a size the feed prices in
a region where the catalog has no row of it gets its rows there (after that size's last
rows, its GPUs and model taken from them).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_CEILING, Decimal
from pathlib import Path

from jupyter_gpucost.cloud.azure_prices import (
    RETAIL_PRICES_URL,
    FeedError,
    VmPrice,
    fetch_all_regions,
    fetch_vm_prices,
)

SHIPPED = Path(__file__).resolve().parent.parent / "jupyter_gpucost" / "data" / "prices.toml"
MICRO = Decimal("0.000001")
_TABLE = re.compile(r"^\[\[(price|instance)\]\]\s*$")


@dataclass
class Segment:
    """Lines of the catalog: a ``[[price]]``/``[[instance]]`` table, or anything else."""

    text: str
    kind: str = ""
    fields: Mapping[str, object] | None = None


def segments(text: str) -> list[Segment]:
    """The catalog's text cut into its tables and what lies between them."""
    found: list[Segment] = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        match = _TABLE.match(lines[i])
        if match is None:
            if found and not found[-1].kind:
                found[-1].text += lines[i]
            else:
                found.append(Segment(lines[i]))
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and lines[i].strip() and not lines[i].startswith(("[", "#")):
            i += 1
        body = "".join(lines[start:i])
        fields = tomllib.loads(body)[match.group(1)][0]
        found.append(Segment(body, match.group(1), fields))
    return found


def _toml(value: object) -> str:
    return str(value) if isinstance(value, int) else json.dumps(str(value), ensure_ascii=False)


def table(kind: str, fields: Sequence[tuple[str, object]]) -> str:
    return f"[[{kind}]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in fields)


def _money(amount: Decimal) -> str:
    return format(amount.normalize(), "f")


def _source(vm: VmPrice, base: str) -> str:
    return f"Azure Retail Prices API ({base}), meter '{vm.meter}', Linux, effective {vm.effective}"


def instance_table(row: Mapping[str, object], vm: VmPrice, base: str, today: date) -> str:
    return table(
        "instance",
        [
            ("provider", "azure"),
            ("instance", vm.sku),
            ("gpu_model", str(row["gpu_model"])),
            ("gpus", int(str(row["gpus"]))),
            ("usd_per_hour", _money(vm.usd_per_hour)),
            ("market", vm.market),
            ("region", vm.region),
            ("source", _source(vm, base)),
            ("as_of", today.isoformat()),
            ("confidence", "listed"),
        ],
    )


def price_table(row: Mapping[str, object], vm: VmPrice, base: str, today: date) -> str:
    gpus = int(str(row.get("gpus_per_instance", 1)))
    per_gpu = (vm.usd_per_hour / gpus).quantize(MICRO, rounding=ROUND_CEILING)
    split = f"{_money(vm.usd_per_hour)} USD per VM / {gpus} GPUs: " if gpus > 1 else ""
    return table(
        "price",
        [
            ("provider", "azure"),
            ("model", str(row["model"])),
            ("instance", str(row["instance"])),
            ("gpus_per_instance", gpus),
            ("usd_per_gpu_hour", _money(per_gpu)),
            ("market", vm.market),
            ("region", vm.region),
            ("source", split + _source(vm, base)),
            ("as_of", today.isoformat()),
            ("confidence", "listed"),
        ],
    )


def _size(segment: Segment) -> str:
    """The Azure VM size a table prices (``[[price]]`` rows name it without ``Standard_``)."""
    fields = segment.fields or {}
    name = str(fields.get("instance", ""))
    return name if name.startswith("Standard_") or not name else f"Standard_{name}"


def _is_azure(segment: Segment) -> bool:
    return segment.fields is not None and segment.fields.get("provider") == "azure"


def sizes(found: Sequence[Segment], region: str) -> list[str]:
    """The sizes to ask the feed for: those of the region's Azure rows, for sale."""
    wanted: dict[str, None] = {}
    for segment in found:
        fields = segment.fields or {}
        regional = _is_azure(segment) and fields.get("region", region) == region
        if regional and _size(segment) and not fields.get("not_for_sale"):
            wanted[_size(segment)] = None
    return list(wanted)


def regenerate(
    text: str, prices: Mapping[tuple[str, str], VmPrice], *, base: str, region: str, today: date
) -> tuple[str, list[str]]:
    """The catalog's text with its Azure rows in ``region`` rewritten from ``prices``, and
    the sizes the feed did not list (their rows kept as they were)."""
    out: list[str] = []
    missing: dict[str, None] = {}
    dropped = False
    for segment in segments(text):
        fields = segment.fields or {}
        if dropped and not segment.kind and segment.text.startswith("\n"):
            # the blank line that followed a dropped table
            segment = Segment(segment.text[1:])
        dropped = False
        regional = _is_azure(segment) and fields.get("region", region) == region
        if not regional or fields.get("not_for_sale"):
            out.append(segment.text)
            continue
        size, market = _size(segment), str(fields.get("market", ""))
        if segment.kind == "instance" and market == "spot":
            if (size, "spot") in prices:
                dropped = True
                continue  # written after its on-demand row
            missing[size] = None
            out.append(segment.text)
            continue
        vm = prices.get((size, market))
        if vm is None:
            missing[size] = None
            out.append(segment.text)
            continue
        if segment.kind == "price":
            out.append(price_table(fields, vm, base, today))
            continue
        out.append(instance_table(fields, vm, base, today))
        spot = prices.get((size, "spot"))
        if spot is not None:
            out.append("\n" + instance_table(fields, spot, base, today))
    return "".join(out), list(missing)


def all_sizes(found: Sequence[Segment]) -> list[str]:
    """Every Azure size of the catalog, in any region, for sale."""
    wanted: dict[str, None] = {}
    for segment in found:
        if _is_azure(segment) and _size(segment) and not (segment.fields or {}).get("not_for_sale"):
            wanted[_size(segment)] = None
    return list(wanted)


def add_regions(
    text: str, prices: Mapping[tuple[str, str], VmPrice], *, base: str, region: str, today: date
) -> str:
    """The catalog's text with rows in ``region`` for each size the feed prices there that
    has none in that region yet, each after the last table of its size and kind."""
    found = segments(text)
    have = {
        (s.kind, _size(s))
        for s in found
        if _is_azure(s) and (s.fields or {}).get("region") == region
    }
    last: dict[tuple[str, str], int] = {}
    for i, segment in enumerate(found):
        if _is_azure(segment) and not (segment.fields or {}).get("not_for_sale"):
            market = str((segment.fields or {}).get("market", ""))
            if market == "on-demand":
                last[(segment.kind, _size(segment))] = i
    after: dict[int, list[str]] = {}
    for (kind, size), i in last.items():
        vm = prices.get((size, "on-demand"))
        if vm is None or (kind, size) in have:
            continue
        fields = found[i].fields or {}
        if kind == "price":
            after.setdefault(i, []).append(price_table(fields, vm, base, today))
            continue
        new = [instance_table(fields, vm, base, today)]
        spot = prices.get((size, "spot"))
        if spot is not None:
            new.append(instance_table(fields, spot, base, today))
        after.setdefault(i, []).extend(new)
    out: list[str] = []
    for i, segment in enumerate(found):
        out.append(segment.text)
        out.extend("\n" + table for table in after.get(i, []))
    return "".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=SHIPPED, help="default: the shipped one")
    parser.add_argument("--region", default="eastus", help="an Azure region (armRegionName)")
    parser.add_argument("--url", default=RETAIL_PRICES_URL, help="the feed's address")
    parser.add_argument("--today", type=date.fromisoformat, help="YYYY-MM-DD (default: today)")
    parser.add_argument("--write", action="store_true", help="rewrite the catalog file")
    parser.add_argument(
        "--all-regions", action="store_true", help="every region that sells the sizes"
    )
    args = parser.parse_args(argv)
    today: date = args.today or datetime.now(UTC).date()
    text = args.catalog.read_text(encoding="utf-8")
    try:
        if args.all_regions:
            by_region = fetch_all_regions(all_sizes(segments(text)), base=args.url)
        else:
            wanted = sizes(segments(text), args.region)
            by_region = {args.region: fetch_vm_prices(args.region, wanted, base=args.url)}
    except FeedError as e:
        print(f"azure_prices: {e}", file=sys.stderr)
        return 2
    new, missing = text, []
    for region, prices in by_region.items():
        new, gone = regenerate(new, prices, base=args.url, region=region, today=today)
        missing += [(size, region) for size in gone]
        if args.all_regions:
            new = add_regions(new, prices, base=args.url, region=region, today=today)
    count = sum(len(p) for p in by_region.values())
    if args.write:
        args.catalog.write_text(new, encoding="utf-8")
        print(f"rewrote the Azure rows of {args.catalog} ({count} prices)")
    else:
        print("\n".join(s.text for s in segments(new) if _is_azure(s)), end="")
    for size, region in missing:
        print(f"azure_prices: {size} is not listed in {region}: kept", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
