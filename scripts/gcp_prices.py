"""Regenerate the catalog's rows of GCP's GPUs attached to N1 VMs, per region.

    python scripts/gcp_prices.py                       # print the rows (us-central1)
    python scripts/gcp_prices.py --region us-central1 --region europe-west4
    python scripts/gcp_prices.py --all-regions --write # every region selling one of the GPUs
    python scripts/gcp_prices.py --write               # rewrite jupyter_gpucost/data/prices.toml

GCP bills a T4, V100, P100 or P4 as an accelerator attached to an N1 VM: the VM's machine
type and each GPU are separate lines (``jupyter_gpucost/core/attached_gpus.py``). This
script writes both halves from two public datasets, each pinned to a commit and named in
every row's ``source`` (``third-party``):

* the GPUs: SkyPilot's GCP catalog, ``catalogs/v8/gcp/vms.csv`` (rows with no instance
  type, one accelerator: its on-demand ``Price`` and ``SpotPrice`` per zone, built by
  SkyPilot from Google's Cloud Billing catalog). Every zone of a region must agree;
* the N1 VMs: Cyclenerd's ``pricing.yml`` (``compute.instance.<type>.cost.<region>``:
  ``hour`` and ``hour_spot``, built from the Cloud Billing catalog; its ``about.generated``
  date is the rows' ``as_of``). A price finer than a micro-dollar is not rounded: that
  machine type is left out in that region (both markets), and named on stderr.

The rows go between the ``# >>> gcp_prices.py`` and ``# <<< gcp_prices.py`` lines of the
catalog; everything else is kept. Exit 1 when a GPU has no price in a region (named on
stderr), 2 when a dataset cannot be read. With ``--all-regions`` the regions are every region
where the GPU dataset prices one of the four GPUs (the shipped rows are written so), and a GPU
the dataset does not list in one of them is not sold there: no row, named on stderr, not an
error.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "jupyter_gpucost" / "data" / "prices.toml"
RAW = "https://raw.githubusercontent.com"
SKYPILOT_REPO = "skypilot-org/skypilot-catalog"
SKYPILOT_COMMIT = "006059e0f18acb1341e22a27751e9f80df6ba92f"
SKYPILOT_PATH = "catalogs/v8/gcp/vms.csv"
CYCLENERD_REPO = "Cyclenerd/google-cloud-pricing-cost-calculator"
CYCLENERD_COMMIT = "fd66b26ff84fee5cdd94f341ea89206e76c06b99"
CYCLENERD_PATH = "pricing.yml"
#: SkyPilot's accelerator name -> (catalog model, GCP's accelerator type)
ACCELERATORS = {
    "T4": ("T4", "nvidia-tesla-t4"),
    "V100": ("V100", "nvidia-tesla-v100"),
    "P100": ("P100", "nvidia-tesla-p100"),
    "P4": ("P4", "nvidia-tesla-p4"),
}
#: the N1 machine types GPUs attach to (shared-core f1/g1 take none)
N1_FAMILIES = ("n1-standard-", "n1-highmem-", "n1-highcpu-")
BEGIN = "# >>> gcp_prices.py"
END = "# <<< gcp_prices.py"
HEADER = """\
# -- GCP: GPUs attached to N1 VMs (written by scripts/gcp_prices.py) -------------------------
#
# GCP bills a T4, V100, P100 or P4 as an accelerator attached to an N1 VM: one price per GPU
# (these [[price]] rows, instance = GCP's accelerator type) plus the VM's own price (the
# [[vm]] rows: an N1 machine type without GPUs). A detected N1 machine is priced VM + each
# GPU NVML sees (jupyter_gpucost/core/attached_gpus.py). N1 prices finer than a micro-dollar
# (n1-standard-1/-2, n1-highcpu-*) are left out, not rounded.
"""


class DatasetError(Exception):
    """A dataset that cannot be read or has not the expected shape."""


@dataclass(frozen=True)
class Row:
    kind: str  # "price" or "vm"
    fields: tuple[tuple[str, str | int], ...]

    def text(self) -> str:
        lines = [f"[[{self.kind}]]"]
        for key, value in self.fields:
            shown = str(value) if isinstance(value, int) else '"' + value.replace('"', "'") + '"'
            lines.append(f"{key} = {shown}")
        return "\n".join(lines) + "\n"


def fetch(url: str, timeout_s: float = 60) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return str(answer.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"cannot read {url}: {e}") from None


def _micro(text: str) -> Decimal | None:
    """A positive price with at most six decimals, exactly as written; ``None`` otherwise."""
    try:
        price = Decimal(text)
    except InvalidOperation:
        return None
    exponent = price.as_tuple().exponent
    if not price.is_finite() or price <= 0 or (isinstance(exponent, int) and exponent < -6):
        return None
    return price


def _one_gpu_records(csv_text: str) -> list[dict[str, str]]:
    """The dataset's rows of one accelerator of ours alone (no machine type)."""
    return [
        record
        for record in csv.DictReader(io.StringIO(csv_text))
        if not record.get("InstanceType")
        and record.get("AcceleratorName", "") in ACCELERATORS
        and record.get("AcceleratorCount", "").split(".")[0] == "1"
    ]


def gpu_regions(csv_text: str) -> list[str]:
    """Every region where the GPU dataset prices one of the four GPUs, sorted."""
    return sorted({str(r["Region"]) for r in _one_gpu_records(csv_text) if r.get("Region")})


def accelerator_rows(
    csv_text: str,
    regions: Sequence[str],
    *,
    commit: str,
    as_of: date,
    unlisted: list[str] | None = None,
) -> tuple[list[Row], list[str]]:
    """One on-demand and one spot ``[[price]]`` row per accelerator and region, and what
    could not be priced. With ``unlisted`` given, a GPU the dataset does not list at all in a
    region is not sold there: named in ``unlisted``, not missing."""
    found: dict[tuple[str, str], list[dict[str, str]]] = {}
    for record in _one_gpu_records(csv_text):
        if record.get("Region") in regions:
            found.setdefault((record["AcceleratorName"], str(record["Region"])), []).append(record)
    rows: list[Row] = []
    missing: list[str] = []
    for region in regions:
        for name, (model, accelerator) in ACCELERATORS.items():
            records = found.get((name, region), [])
            if not records and unlisted is not None:
                unlisted.append(f"{name} in {region}")
                continue
            zones = sorted({r["AvailabilityZone"].rsplit("-", 1)[-1] for r in records})
            for market, column in (("on-demand", "Price"), ("spot", "SpotPrice")):
                prices = {r[column] for r in records if r.get(column)}
                price = _micro(prices.pop()) if len(prices) == 1 else None
                if price is None:
                    why = "zones disagree" if len(prices) > 1 else "no price"
                    missing.append(f"{name} {market} in {region}: {why}")
                    continue
                source = (
                    f"{SKYPILOT_REPO} {SKYPILOT_PATH} ({commit[:8]}; one {name} attached, "
                    f"{region} zones {', '.join(zones)}; the file is undated)"
                )
                rows.append(
                    Row(
                        "price",
                        (
                            ("provider", "gcp"),
                            ("model", model),
                            ("instance", accelerator),
                            ("gpus_per_instance", 1),
                            ("usd_per_gpu_hour", str(price)),
                            ("market", market),
                            ("region", region),
                            ("source", source),
                            ("as_of", as_of.isoformat()),
                            ("confidence", "third-party"),
                        ),
                    )
                )
    return rows, missing


def _generated(about: object) -> date:
    """``about.generated`` (``Thu Jul 30 06:13:17 2026``) as a date."""
    text = about.get("generated") if isinstance(about, dict) else None
    try:
        return datetime.strptime(str(text), "%a %b %d %H:%M:%S %Y").date()
    except ValueError:
        raise DatasetError(f"pricing.yml: about.generated {text!r} is not a date") from None


def _order(machine_type: str) -> tuple[int, int]:
    family = next(i for i, f in enumerate(N1_FAMILIES) if machine_type.startswith(f))
    return family, int(machine_type.rsplit("-", 1)[-1])


def pricing(yml_text: str) -> tuple[date, Mapping[str, object]]:
    """``pricing.yml``'s ``about.generated`` date and its ``compute.instance`` mapping,
    every scalar as written."""
    try:
        data = yaml.load(yml_text, Loader=yaml.CBaseLoader)
    except yaml.YAMLError as e:
        raise DatasetError(f"pricing.yml is not YAML: {e}") from None
    if not isinstance(data, dict):
        raise DatasetError("pricing.yml: not a mapping")
    instances = data.get("compute", {}).get("instance", {})
    if not isinstance(instances, dict):
        raise DatasetError("pricing.yml: no compute.instance")
    return _generated(data.get("about")), instances


def vm_rows(yml_text: str, regions: Sequence[str], *, commit: str) -> tuple[list[Row], list[str]]:
    """One on-demand and one spot ``[[vm]]`` row per N1 machine type and region, and the
    prices left out (finer than a micro-dollar)."""
    as_of, instances = pricing(yml_text)
    types = sorted((t for t in instances if t.startswith(N1_FAMILIES)), key=_order)
    rows: list[Row] = []
    skipped: list[str] = []
    for region in regions:
        for machine_type in types:
            entry = instances[machine_type]
            cost = entry.get("cost", {}).get(region) if isinstance(entry, dict) else None
            if not isinstance(cost, dict):
                continue
            markets = (("on-demand", "hour"), ("spot", "hour_spot"))
            prices = {key: _micro(str(cost.get(key, ""))) for _, key in markets}
            if None in prices.values():
                # both markets or neither: a spot row alone would bound nothing on-demand
                skipped += [f"{machine_type} {m} in {region}: {cost.get(k)!r}" for m, k in markets]
                continue
            for market, key in markets:
                price = prices[key]
                source = (
                    f"{CYCLENERD_REPO} {CYCLENERD_PATH} ({commit[:8]}, generated "
                    f"{as_of.isoformat()} from the Cloud Billing catalog), "
                    f"compute.instance.{machine_type}.cost.{region}.{key}"
                )
                rows.append(
                    Row(
                        "vm",
                        (
                            ("provider", "gcp"),
                            ("machine_type", machine_type),
                            ("usd_per_hour", str(price)),
                            ("market", market),
                            ("region", region),
                            ("source", source),
                            ("as_of", as_of.isoformat()),
                            ("confidence", "third-party"),
                        ),
                    )
                )
    return rows, skipped


def block(prices: Sequence[Row], vms: Sequence[Row]) -> str:
    """The catalog's block of these rows, between its markers."""
    body = "\n".join(r.text() for r in (*prices, *vms))
    return f"{BEGIN}\n{HEADER}\n{body}{END}\n"


def rewrite(catalog: str, new_block: str, begin: str = BEGIN, end_line: str = END) -> str:
    """``catalog`` with its block between the markers replaced (DatasetError: none)."""
    start = catalog.find(begin + "\n")
    end = catalog.find(end_line + "\n", max(start, 0))
    if start < 0 or end < start:
        raise DatasetError(f"the catalog has no {begin!r} ... {end_line!r} block")
    return catalog[:start] + new_block + catalog[end + len(end_line) + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=SHIPPED, help="default: the shipped one")
    parser.add_argument("--region", action="append", help="a GCP region (default us-central1)")
    parser.add_argument(
        "--all-regions",
        action="store_true",
        help="every region where the GPU dataset prices one of the GPUs (not with --region)",
    )
    parser.add_argument("--raw", default=RAW, help="where the datasets are served from")
    parser.add_argument(
        "--skypilot-commit", default=SKYPILOT_COMMIT, help="the SkyPilot catalog's commit"
    )
    parser.add_argument("--cyclenerd-commit", default=CYCLENERD_COMMIT, help="pricing.yml's")
    parser.add_argument(
        "--gpus-as-of",
        type=date.fromisoformat,
        help="YYYY-MM-DD the GPU dataset was read (it is undated; default: today)",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the catalog file")
    args = parser.parse_args(argv)
    if args.all_regions and args.region:
        parser.error("--all-regions and --region exclude each other")
    regions: list[str] = args.region or ["us-central1"]
    unlisted: list[str] | None = [] if args.all_regions else None
    as_of: date = args.gpus_as_of or datetime.now(UTC).date()
    base = args.raw.rstrip("/")
    try:
        csv_text = fetch(f"{base}/{SKYPILOT_REPO}/{args.skypilot_commit}/{SKYPILOT_PATH}")
        yml_text = fetch(f"{base}/{CYCLENERD_REPO}/{args.cyclenerd_commit}/{CYCLENERD_PATH}")
        if args.all_regions:
            regions = gpu_regions(csv_text)
        prices, missing = accelerator_rows(
            csv_text, regions, commit=args.skypilot_commit, as_of=as_of, unlisted=unlisted
        )
        vms, skipped = vm_rows(yml_text, regions, commit=args.cyclenerd_commit)
        new_block = block(prices, vms)
        if args.write:
            text = args.catalog.read_text(encoding="utf-8")
            args.catalog.write_text(rewrite(text, new_block), encoding="utf-8")
            print(f"rewrote the GCP N1 rows of {args.catalog} ({len(prices) + len(vms)} rows)")
        else:
            print(new_block, end="")
    except DatasetError as e:
        print(f"gcp_prices: {e}", file=sys.stderr)
        return 2
    for what in skipped:
        print(f"gcp_prices: left out, finer than a micro-dollar: {what}", file=sys.stderr)
    for what in unlisted or []:
        print(f"gcp_prices: not sold there (the dataset lists none): {what}", file=sys.stderr)
    for what in missing:
        print(f"gcp_prices: no price: {what}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
