"""Write the catalog's rows of GCP's accelerator-optimized VMs in every region that sells them.

    python scripts/gcp_accelerator_vms.py            # print the block
    python scripts/gcp_accelerator_vms.py --write    # rewrite jupyter_gpucost/data/prices.toml

GCP's a2, a3 and g2 machine types carry their GPUs in the machine type. The rows go between
the ``# >>> gcp_accelerator_vms.py`` and ``# <<< gcp_accelerator_vms.py`` lines of the
catalog; everything else is kept. Which machine types, their GPU model and count, and which
(model, market) has a per-GPU row of which machine type are read from the catalog's own GCP
rows outside the generated blocks (the us-central1 rows written by hand); a row the catalog
already has there (same machine type or model, market and region) is kept, not written again.

* Where: every region where the machine type is sold, :data:`SOLD_IN` (the regions of its
  zones in SkyPilot's GCP catalog, ``catalogs/v8/gcp/vms.csv`` at the commit
  ``gcp_prices.py`` pins). Cyclenerd's ``pricing.yml`` also prices these types in regions
  that sell none (its prices follow the SKUs Google lists): those get no row.
* What: ``pricing.yml`` (the commit ``gcp_prices.py`` pins, built from the Cloud Billing
  catalog), ``compute.instance.<type>.cost.<region>``: ``hour`` on-demand, ``hour_spot``
  spot. It publishes these prices with up to 14 decimals (88.4899999025753): each is
  rounded half up to the micro-dollar per VM-hour (a per-GPU row: the VM's price divided by
  its GPUs, then rounded half up), and a rounded row's ``source`` starts with the figure as
  published. The rows are ``third-party``, dated by ``about.generated``.

Exit 2 when the dataset or the catalog cannot be read.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path

from gcp_prices import (
    BEGIN,
    CYCLENERD_COMMIT,
    CYCLENERD_PATH,
    CYCLENERD_REPO,
    END,
    RAW,
    SHIPPED,
    DatasetError,
    Row,
    fetch,
    pricing,
    rewrite,
)

_A2_HIGHGPU = (
    "asia-northeast1 asia-northeast3 asia-southeast1 europe-west4 me-west1 us-central1 "
    "us-east1 us-west1 us-west3 us-west4"
)
_A2_ULTRAGPU = "asia-southeast1 europe-west4 us-central1 us-east4 us-east5"
_A3_HIGHGPU = (
    "asia-east1 asia-northeast1 asia-south1 asia-south2 asia-southeast1 australia-southeast1 "
    "europe-north1 europe-west1 europe-west3 europe-west4 europe-west8 europe-west9 "
    "us-central1 us-east4 us-east5 us-west1 us-west4"
)
_G2 = (
    "asia-east1 asia-northeast1 asia-northeast3 asia-south1 asia-southeast1 europe-west1 "
    "europe-west2 europe-west3 europe-west4 europe-west6 me-central2 northamerica-northeast1 "
    "northamerica-northeast2 us-central1 us-east1 us-east4 us-west1 us-west4"
)
#: where each accelerator-optimized machine type is sold: the regions of its zones in
#: SkyPilot's catalogs/v8/gcp/vms.csv at gcp_prices.SKYPILOT_COMMIT (the rows naming the
#: machine type, built by SkyPilot from the machine types GCP lists per zone). pricing.yml
#: prices these types in regions where Google lists the SKUs but sells no such VM
#: (a2-highgpu-1g in 39): only the regions here get rows.
SOLD_IN: dict[str, tuple[str, ...]] = {
    **{f"a2-highgpu-{n}g": tuple(_A2_HIGHGPU.split()) for n in (1, 2, 4, 8)},
    "a2-megagpu-16g": ("asia-southeast1", "europe-west4", "us-central1"),
    **{f"a2-ultragpu-{n}g": tuple(_A2_ULTRAGPU.split()) for n in (1, 2, 4, 8)},
    **{f"a3-highgpu-{n}g": tuple(_A3_HIGHGPU.split()) for n in (1, 2, 4)},
    "a3-highgpu-8g": tuple(r for r in _A3_HIGHGPU.split() if r != "europe-west8"),
    **{f"g2-standard-{n}": tuple(_G2.split()) for n in (4, 8, 12, 16, 24, 32, 48, 96)},
}
VMS_BEGIN = "# >>> gcp_accelerator_vms.py"
VMS_END = "# <<< gcp_accelerator_vms.py"
MICRO = Decimal("0.000001")
VMS_HEADER = """\
# -- GCP: accelerator-optimized VMs (written by scripts/gcp_accelerator_vms.py) ---------------
#
# The a2, a3 and g2 machine types of the rows above, in every other region and market
# where they are sold (the regions of their zones in SkyPilot's GCP catalog, v8 vms.csv at
# commit 006059e0), priced from Cyclenerd's pricing.yml. pricing.yml gives these prices
# with up to 14 decimals: each is rounded half up to the micro-dollar per VM-hour (per
# GPU-hour for the per-GPU rows, after dividing by the GPUs); a rounded row's source gives
# the published figure.
"""


@dataclass(frozen=True)
class Size:
    """An accelerator-optimized machine type the catalog prices."""

    machine_type: str
    model: str
    gpus: int
    not_for_sale: str


@dataclass
class Shipped:
    """What the catalog has outside the generated blocks, of GCP's a2/a3/g2 types."""

    sizes: dict[str, Size]
    #: (table, machine type or model, market, region) of every such row
    have: set[tuple[str, str, str, str]]
    #: (model, market) -> the machine type its per-GPU rows are priced from
    per_gpu: dict[tuple[str, str], str]


def shipped_rows(catalog: str) -> Shipped:
    """The catalog's GCP accelerator-optimized rows, outside both generated blocks."""
    for begin, end_line in ((VMS_BEGIN, VMS_END), (BEGIN, END)):
        start = catalog.find(begin + "\n")
        end = catalog.find(end_line + "\n", max(start, 0))
        if start >= 0 and end > start:
            catalog = catalog[:start] + catalog[end + len(end_line) + 1 :]
    try:
        data = tomllib.loads(catalog)
    except tomllib.TOMLDecodeError as e:
        raise DatasetError(f"the catalog is not valid TOML: {e}") from None
    shipped = Shipped({}, set(), {})
    for row in data.get("instance", []):
        if row.get("provider") == "gcp":
            name = str(row["instance"])
            sale = str(row.get("not_for_sale", ""))
            size = Size(name, str(row["gpu_model"]), int(row["gpus"]), sale)
            if name not in shipped.sizes or sale:
                shipped.sizes[name] = size
            shipped.have.add(("instance", name, str(row["market"]), str(row.get("region", ""))))
    for row in data.get("price", []):
        if row.get("provider") == "gcp" and row.get("instance") in shipped.sizes:
            model, market = str(row["model"]), str(row["market"])
            shipped.per_gpu.setdefault((model, market), str(row["instance"]))
            shipped.have.add(("price", model, market, str(row.get("region", ""))))
    for (model, market), name in list(shipped.per_gpu.items()):
        other = "spot" if market == "on-demand" else "on-demand"
        shipped.per_gpu.setdefault((model, other), name)
    return shipped


def _published(text: str) -> Decimal | None:
    """A positive price as published, ``None`` when it is not one."""
    try:
        price = Decimal(text)
    except InvalidOperation:
        return None
    return price if price.is_finite() and price > 0 else None


def _cyclenerd_source(
    instance: Mapping[str, object], name: str, region: str, key: str, *, commit: str, as_of: date
) -> str:
    ssd = "local SSD included: " if "local-ssd" in instance else ""
    return (
        f"{ssd}{CYCLENERD_REPO} {CYCLENERD_PATH} ({commit[:8]}, generated {as_of.isoformat()} "
        f"from the Cloud Billing catalog), compute.instance.{name}.cost.{region}.{key}"
    )


def accelerator_vm_rows(yml_text: str, shipped: Shipped, *, commit: str) -> list[Row]:
    """The per-GPU ``[[price]]`` rows, then the ``[[instance]]`` rows, of every shipped
    a2/a3/g2 machine type in every region and market ``pricing.yml`` prices it and the
    catalog has no row of."""
    as_of, instances = pricing(yml_text)
    markets = (("on-demand", "hour"), ("spot", "hour_spot"))

    def costs(name: str) -> Iterator[tuple[str, str, str, str, Decimal]]:
        instance = instances.get(name)
        if not isinstance(instance, dict):
            return
        cost = instance.get("cost")
        for region in sorted(cost) if isinstance(cost, dict) else []:
            if region not in SOLD_IN.get(name, ()):
                continue
            for market, key in markets:
                found = cost[region]
                published = found.get(key) if isinstance(found, dict) else None
                price = _published(str(published)) if published is not None else None
                if price is not None:
                    source = _cyclenerd_source(
                        instance, name, region, key, commit=commit, as_of=as_of
                    )
                    yield region, market, str(published), source, price

    prices: list[Row] = []
    for (model, market), name in sorted(shipped.per_gpu.items()):
        gpus = shipped.sizes[name].gpus
        for region, sold, published, source, price in costs(name):
            if sold != market or ("price", model, market, region) in shipped.have:
                continue
            per_gpu = (price / gpus).quantize(MICRO, rounding=ROUND_HALF_UP)
            split = f"{published} USD per VM / {gpus} GPUs" if gpus > 1 else published
            if per_gpu * gpus != price:
                source = f"{split}, rounded half up to the micro-dollar: {source}"
            fields: tuple[tuple[str, str | int], ...] = (
                ("provider", "gcp"),
                ("model", model),
                ("instance", name),
                ("gpus_per_instance", gpus),
                ("usd_per_gpu_hour", _money(per_gpu)),
                ("market", market),
                ("region", region),
                ("source", source),
                ("as_of", as_of.isoformat()),
                ("confidence", "third-party"),
            )
            prices.append(Row("price", fields))
    vms: list[Row] = []
    for name, size in shipped.sizes.items():
        for region, market, published, source, price in costs(name):
            if ("instance", name, market, region) in shipped.have:
                continue
            rounded = price.quantize(MICRO, rounding=ROUND_HALF_UP)
            if rounded != price:
                source = f"{published}, rounded half up to the micro-dollar: {source}"
            fields = (
                ("provider", "gcp"),
                ("instance", name),
                ("gpu_model", size.model),
                ("gpus", size.gpus),
                ("usd_per_hour", _money(rounded)),
                ("market", market),
                ("region", region),
                ("source", source),
                ("as_of", as_of.isoformat()),
                ("confidence", "third-party"),
            )
            if market == "on-demand" and size.not_for_sale:
                fields += (("not_for_sale", size.not_for_sale),)
            vms.append(Row("instance", fields))
    return prices + vms


def _money(amount: Decimal) -> str:
    return format(amount.normalize(), "f")


def vms_block(rows: Sequence[Row]) -> str:
    """The catalog's block of the accelerator-optimized VMs, between its markers."""
    body = "\n".join(r.text() for r in rows)
    return f"{VMS_BEGIN}\n{VMS_HEADER}\n{body}{VMS_END}\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=SHIPPED, help="default: the shipped one")
    parser.add_argument("--raw", default=RAW, help="where pricing.yml is served from")
    parser.add_argument("--cyclenerd-commit", default=CYCLENERD_COMMIT, help="pricing.yml's")
    parser.add_argument("--write", action="store_true", help="rewrite the catalog file")
    args = parser.parse_args(argv)
    base = args.raw.rstrip("/")
    try:
        text = args.catalog.read_text(encoding="utf-8")
        yml_text = fetch(f"{base}/{CYCLENERD_REPO}/{args.cyclenerd_commit}/{CYCLENERD_PATH}")
        rows = accelerator_vm_rows(yml_text, shipped_rows(text), commit=args.cyclenerd_commit)
        new_block = vms_block(rows)
        if args.write:
            args.catalog.write_text(rewrite(text, new_block, VMS_BEGIN, VMS_END), encoding="utf-8")
            print(f"rewrote the GCP a2/a3/g2 rows of {args.catalog} ({len(rows)} rows)")
        else:
            print(new_block, end="")
    except DatasetError as e:
        print(f"gcp_accelerator_vms: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
