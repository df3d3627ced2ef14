"""Generate the catalog's AWS GPU rows per region from AWS's public bulk price list.

    python scripts/aws_prices.py                          # every region, printed as TOML
    python scripts/aws_prices.py --region eu-west-1 --region ap-northeast-1
    python scripts/aws_prices.py --base http://127.0.0.1:8000   # a mirror of the files

Reads the Price List Bulk API (no credentials): ``/offers/v1.0/aws/AmazonEC2/current/
region_index.json`` names each region's offer file (``currentVersionUrl``); each offer file
is read as a stream, one product and one term at a time (the real files are hundreds of
MB), keeping the Linux, shared-tenancy, no pre-installed software, ``capacitystatus`` Used
products of the GPU instance types the catalog prices (its ``[[instance]]`` rows and the
instances of its ``[[price]]`` rows, of families g4dn, g5, g6, g6e, p3, p3dn, p4d, p4de,
p5, p5e, p5en) and their OnDemand price per hour in USD. Prints one ``[[instance]]`` row per
instance type and region, and one ``[[price]]`` row (the price divided by its GPUs, rounded
up to the micro-dollar) per per-GPU row of the catalog, each ``listed``, dated with the
offer file's ``publicationDate`` and naming the file it came from. Merge them into
``jupyter_gpucost/data/prices.toml``'s AWS section (the rows of a region replace that
region's rows). Exit 2 when a file cannot be read.

The offer file's products come before its terms (as AWS writes them); a file with its terms
first is refused rather than held in memory.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from pathlib import Path
from typing import IO

SHIPPED = Path(__file__).resolve().parent.parent / "jupyter_gpucost" / "data" / "prices.toml"
BASE = "https://pricing.us-east-1.amazonaws.com"
INDEX = "/offers/v1.0/aws/AmazonEC2/current/region_index.json"
FAMILIES = ("g4dn", "g5", "g6", "g6e", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en")
#: the attributes of the one product per instance type and region that is "a Linux
#: on-demand instance": shared tenancy, no SQL or other software, a used (not reserved)
#: capacity, no licence
WANTED = {
    "productFamily": "Compute Instance",
    "tenancy": "Shared",
    "operatingSystem": "Linux",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
}
MICRO = Decimal("0.000001")
CHUNK = 1 << 16
_DECODER = json.JSONDecoder()


class FeedError(Exception):
    """A price file that cannot be read or is not shaped as AWS documents it."""


Open = Callable[[str], IO[bytes]]


def _open(url: str) -> IO[bytes]:
    try:
        answer: IO[bytes] = urllib.request.urlopen(url, timeout=60)
    except OSError as e:
        raise FeedError(f"GET {url}: {e}") from None
    return answer


# -- a JSON stream read one value at a time -------------------------------------------------


class _Stream:
    """The text of a JSON document, read in chunks; values are decoded one at a time, so
    only the value being read is held."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.buf = ""
        self.pos = 0
        self.done = False

    def _more(self) -> bool:
        if self.done:
            return False
        chunk = self.raw.read(CHUNK)
        if not chunk:
            self.done = True
            return False
        self.buf = self.buf[self.pos :] + chunk.decode("utf-8")
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space (``""`` at the end)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise FeedError(f"expected {char!r}, found {self.peek()!r}")
        self.pos += 1

    def value(self) -> object:
        """The next JSON value, whole."""
        self.peek()
        while True:
            try:
                found, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if not self._more():
                    raise FeedError("the file ends inside a value") from None
                continue
            # a number at the end of the buffer may go on in the next chunk
            at_end = end == len(self.buf) and not isinstance(found, dict | list | str)
            if at_end and self._more():
                continue
            self.pos = end
            return found

    def members(self) -> Iterator[str]:
        """The keys of the object that starts here, each left for the caller to read."""
        self.expect("{")
        first = True
        while True:
            if self.peek() == "}":
                self.pos += 1
                return
            if not first:
                self.expect(",")
            first = False
            key = self.value()
            if not isinstance(key, str):
                raise FeedError("an object's key is not a string")
            self.expect(":")
            yield key


# -- an offer file ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Offer:
    """The OnDemand prices per hour of the wanted instance types in one region's file."""

    region: str
    url: str
    published: str
    usd_per_hour: Mapping[str, Decimal]


def _product(raw: object, instances: frozenset[str]) -> str | None:
    """The instance type of a wanted product (``None``: not one)."""
    if not isinstance(raw, dict):
        return None
    attributes = raw.get("attributes")
    if not isinstance(attributes, dict):
        return None
    fields = {**attributes, "productFamily": raw.get("productFamily")}
    if any(fields.get(k) != v for k, v in WANTED.items()):
        return None
    instance = attributes.get("instanceType")
    return instance if isinstance(instance, str) and instance in instances else None


def _hourly(offers: object) -> Decimal | None:
    """The USD per hour of a SKU's OnDemand offers (its one priced dimension in hours)."""
    if not isinstance(offers, dict):
        return None
    found: list[Decimal] = []
    for offer in offers.values():
        dimensions = offer.get("priceDimensions") if isinstance(offer, dict) else None
        for dim in dimensions.values() if isinstance(dimensions, dict) else ():
            price = dim.get("pricePerUnit", {}).get("USD") if isinstance(dim, dict) else None
            if dim.get("unit") != "Hrs" or not isinstance(price, str):
                continue
            try:
                found.append(Decimal(price))
            except InvalidOperation:
                raise FeedError(f"a price that is not a number: {price!r}") from None
    positive = [p for p in found if p > 0]
    return positive[0] if len(positive) == 1 else None


def read_offer(raw: IO[bytes], *, region: str, url: str, instances: frozenset[str]) -> Offer:
    """The wanted instance types' OnDemand prices in one offer file, read as a stream."""
    stream = _Stream(raw)
    skus: dict[str, str] = {}
    prices: dict[str, Decimal] = {}
    published = ""
    products_read = False
    for key in stream.members():
        if key == "products":
            products_read = True
            for sku in stream.members():
                instance = _product(stream.value(), instances)
                if instance is not None:
                    skus[sku] = instance
        elif key == "terms":
            if not products_read:
                # the products are not read yet: their terms could not be told apart
                raise FeedError(f"{url}: the terms come before the products")
            for term in stream.members():
                for sku in stream.members():
                    offers = stream.value()
                    if term != "OnDemand" or sku not in skus:
                        continue
                    price = _hourly(offers)
                    if price is not None:
                        prices[skus[sku]] = price
        else:
            value = stream.value()
            if key == "publicationDate" and isinstance(value, str):
                published = value
    if not published:
        raise FeedError(f"{url} has no publicationDate")
    return Offer(region, url, published, prices)


def region_urls(index: Mapping[str, object], base: str) -> dict[str, str]:
    """Each region's offer file, from ``region_index.json``."""
    regions = index.get("regions")
    if not isinstance(regions, dict):
        raise FeedError("region_index.json has no regions")
    urls: dict[str, str] = {}
    for code, entry in regions.items():
        url = entry.get("currentVersionUrl") if isinstance(entry, dict) else None
        if not isinstance(url, str) or not url.startswith("/"):
            raise FeedError(f"region {code!r} has no currentVersionUrl")
        urls[str(code)] = base + url
    return urls


# -- the catalog's AWS sizes and the rows -----------------------------------------------------


@dataclass(frozen=True)
class Size:
    instance: str
    gpu_model: str
    gpus: int


def sizes(catalog: Mapping[str, object]) -> tuple[dict[str, Size], dict[str, Mapping[str, object]]]:
    """The AWS GPU sizes the catalog prices whole, and its per-GPU rows by instance."""
    whole: dict[str, Size] = {}
    for row in catalog.get("instance", []):  # type: ignore[attr-defined]
        if row.get("provider") != "aws" or row.get("not_for_sale"):
            continue
        if str(row["instance"]).split(".")[0] in FAMILIES:
            whole[row["instance"]] = Size(row["instance"], row["gpu_model"], int(row["gpus"]))
    per_gpu = {
        str(row["instance"]): row
        for row in catalog.get("price", [])  # type: ignore[attr-defined]
        if row.get("provider") == "aws" and str(row.get("instance", "")) in whole
    }
    return whole, per_gpu


def _money(amount: Decimal) -> str:
    return format(amount.normalize(), "f")


def _table(kind: str, fields: Sequence[tuple[str, object]]) -> str:
    def toml(value: object) -> str:
        return str(value) if isinstance(value, int) else json.dumps(str(value))

    return f"[[{kind}]]\n" + "".join(f"{k} = {toml(v)}\n" for k, v in fields)


def rows(
    offer: Offer, whole: Mapping[str, Size], per_gpu: Mapping[str, Mapping[str, object]]
) -> list[str]:
    """The ``[[instance]]`` and ``[[price]]`` rows of one region's offer."""
    date = offer.published[:10]
    source = (
        f"AWS Price List Bulk API, {offer.url} (publicationDate {offer.published}); "
        "OnDemand, Linux, shared tenancy, no pre-installed software"
    )
    out: list[str] = []
    for instance in sorted(offer.usd_per_hour):
        size, usd = whole[instance], offer.usd_per_hour[instance]
        common = [("market", "on-demand"), ("region", offer.region), ("source", source)]
        dated = [("as_of", date), ("confidence", "listed")]
        out.append(
            _table(
                "instance",
                [
                    ("provider", "aws"),
                    ("instance", instance),
                    ("gpu_model", size.gpu_model),
                    ("gpus", size.gpus),
                    ("usd_per_hour", _money(usd)),
                    *common,
                    *dated,
                ],
            )
        )
        if instance in per_gpu:
            share = (usd / size.gpus).quantize(MICRO, rounding=ROUND_CEILING)
            split = f"{_money(usd)} USD per instance / {size.gpus} GPUs: " if size.gpus > 1 else ""
            out.append(
                _table(
                    "price",
                    [
                        ("provider", "aws"),
                        ("model", size.gpu_model),
                        ("instance", instance),
                        ("gpus_per_instance", size.gpus),
                        ("usd_per_gpu_hour", _money(share)),
                        ("market", "on-demand"),
                        ("region", offer.region),
                        ("source", split + source),
                        *dated,
                    ],
                )
            )
    return out


def main(argv: Sequence[str] | None = None, *, opener: Open = _open) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=SHIPPED, help="default: the shipped one")
    parser.add_argument("--base", default=BASE, help="where the price list is served")
    parser.add_argument("--region", action="append", help="a region (repeat); default: all")
    args = parser.parse_args(argv)
    whole, per_gpu = sizes(tomllib.loads(args.catalog.read_text(encoding="utf-8")))
    instances = frozenset(whole)
    try:
        with opener(args.base + INDEX) as raw:
            index = json.load(raw)
        urls = region_urls(index, args.base)
        wanted = args.region or sorted(urls)
        unknown = [r for r in wanted if r not in urls]
        if unknown:
            raise FeedError(f"the price list has no region {', '.join(unknown)}")
        out: list[str] = []
        for region in wanted:
            with opener(urls[region]) as raw:
                offer = read_offer(raw, region=region, url=urls[region], instances=instances)
            out += rows(offer, whole, per_gpu)
    except (FeedError, json.JSONDecodeError, UnicodeDecodeError) as e:
        print(f"aws_prices: {e}", file=sys.stderr)
        return 2
    print("\n".join(out), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
