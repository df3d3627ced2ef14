"""Keeping the catalog true: Azure's rows regenerated from its Retail Prices API (a loopback
stand-in serving recorded items; nothing here reaches the network) and the rows too old."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tomllib
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import pytest
from azure_prices_standin import AzurePrices, Feed, recorded_items, serve

from jupyter_gpucost.cloud.azure_prices import FeedError, fetch_items, fetch_vm_prices
from jupyter_gpucost.core.catalog import load_catalog
from jupyter_gpucost.core.instance_prices import (
    AdminPrices,
    find_instance,
    load_instance_rows,
    plan_prices,
)

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "jupyter_gpucost" / "data" / "prices.toml"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"gpucost_{name}", ROOT / "scripts" / f"{name}.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


AZURE = _script("azure_prices")
AGE = _script("price_age")


@pytest.fixture
def azure() -> Iterator[AzurePrices]:
    yield from serve()


def test_the_feed_gives_a_size_s_linux_on_demand_and_spot_prices_in_a_region(
    azure: AzurePrices,
) -> None:
    found = fetch_vm_prices(
        "eastus", ["Standard_NC24ads_A100_v4", "Standard_NC4as_T4_v3"], base=azure.url
    )
    # not Windows, Low Priority, westus3, a reservation or the price it superseded
    assert {key: vm.usd_per_hour for key, vm in found.items()} == {
        ("Standard_NC24ads_A100_v4", "on-demand"): Decimal("3.673"),
        ("Standard_NC24ads_A100_v4", "spot"): Decimal("0.7345"),
        ("Standard_NC4as_T4_v3", "on-demand"): Decimal("0.526"),
    }
    spot = found[("Standard_NC24ads_A100_v4", "spot")]
    assert (spot.meter, spot.effective, spot.region) == (
        "NC24ads A100 v4 Spot",
        "2026-11-01",
        "eastus",
    )
    # one query, filtered by the feed
    (asked,) = azure.feed.asked
    assert "armSkuName+eq+%27Standard_NC24ads_A100_v4%27" in asked


def test_every_page_is_read() -> None:
    for azure in serve(Feed(page_size=2)):
        skus = sorted({str(i["armSkuName"]) for i in recorded_items()})
        found = fetch_vm_prices("eastus", skus, base=azure.url)
        assert {sku for sku, _ in found} == set(skus)
        assert any("%24skip=2" in path for path in azure.feed.asked)


def test_a_next_page_on_another_host_is_refused() -> None:
    for azure in serve(Feed(page_size=2, next_origin="http://127.0.0.2:9")):
        with pytest.raises(FeedError, match="the next page is on another host"):
            fetch_vm_prices("eastus", ["Standard_NC24ads_A100_v4"], base=azure.url)
        assert len(azure.feed.asked) == 1


@pytest.mark.parametrize("answer", ["<html>busy</html>", '{"Items": 3}', "[]"])
def test_an_answer_that_is_not_the_feed_s_is_an_error(answer: str) -> None:
    with pytest.raises(FeedError):
        fetch_items("https://feed.invalid/api", get=lambda url: answer)


def test_a_size_name_cannot_break_out_of_the_filter() -> None:
    with pytest.raises(ValueError, match="cannot be asked"):
        fetch_vm_prices("eastus", ["x' or armSkuName ne '"], base="http://127.0.0.1:9")


def _run(script: ModuleType, *argv: str) -> int:
    code = script.main(list(argv))
    assert isinstance(code, int)
    return code


def test_the_maintainer_s_script_rewrites_the_azure_rows_from_the_feed(
    azure: AzurePrices, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "prices.toml"
    shutil.copy(SHIPPED, catalog)
    assert (
        _run(
            AZURE, "--catalog", str(catalog), "--url", azure.url, "--today", "2026-12-01", "--write"
        )
        == 0
    )
    assert "rewrote the Azure rows" in capsys.readouterr().out
    rows = load_instance_rows(catalog)
    prices = load_catalog(catalog)
    # every Azure size for sale: the provider's own figure, dated, naming the meter
    for row in [r for r in rows if r.provider == "azure" and not r.not_for_sale]:
        assert (row.confidence, row.as_of) == ("listed", "2026-12-01"), row
        assert row.source.startswith(f"Azure Retail Prices API ({azure.url}), meter '"), row
    for price in [r for r in prices.rows if r.provider == "azure"]:
        assert (price.confidence, price.as_of) == ("listed", "2026-12-01"), price
    nc24 = prices.find(provider="azure", market="on-demand", model="A100-80GB")
    assert nc24 is not None
    assert nc24.usd_per_gpu_hour == Decimal("3.673")
    nd96 = prices.find(provider="azure", market="on-demand", model="H100-80GB")
    assert nd96 is not None
    assert nd96.usd_per_gpu_hour == Decimal("12.29")
    assert nd96.source.startswith("98.32 USD per VM / 8 GPUs: Azure Retail Prices API")
    # the feed's spot price is a row: a detected spot VM is priced whole from it
    plan = plan_prices(
        AdminPrices(),
        provider="azure",
        instance_type="Standard_NC24ads_A100_v4",
        market="spot",
        shared=False,
        providers=prices.providers,
        rows=rows,
    )
    assert plan.whole is not None
    assert plan.whole.per_gpu.usd_per_gpu_hour == Decimal("0.7345")
    assert plan.whole.per_gpu.confidence == "listed"
    # a retired size is not asked for and stays marked
    retired = find_instance(rows, provider="azure", instance="Standard_NC6s_v3", market="on-demand")
    assert retired is not None
    assert retired.not_for_sale.startswith("retired")
    # the other providers' rows, and their order, are untouched
    before = [r for r in load_instance_rows(SHIPPED) if r.provider != "azure"]
    assert [r for r in rows if r.provider != "azure"] == before
    assert [r for r in load_catalog().rows if r.provider != "azure"] == [
        r for r in prices.rows if r.provider != "azure"
    ]
    # run again: the same file
    text = catalog.read_text()
    assert (
        _run(
            AZURE, "--catalog", str(catalog), "--url", azure.url, "--today", "2026-12-01", "--write"
        )
        == 0
    )
    assert catalog.read_text() == text


def test_a_size_the_feed_does_not_list_is_kept_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = [i for i in recorded_items() if i["armSkuName"] != "Standard_ND96amsr_A100_v4"]
    for azure in serve(Feed(items=items)):
        catalog = tmp_path / "prices.toml"
        shutil.copy(SHIPPED, catalog)
        assert _run(AZURE, "--catalog", str(catalog), "--url", azure.url, "--write") == 1
        assert "Standard_ND96amsr_A100_v4 is not listed in eastus: kept" in capsys.readouterr().err
        row = find_instance(
            load_instance_rows(catalog),
            provider="azure",
            instance="Standard_ND96amsr_A100_v4",
            market="on-demand",
        )
        assert row is not None
        assert (row.confidence, row.usd_per_hour) == ("third-party", Decimal("32.77"))


def test_without_write_the_script_prints_the_new_rows(
    azure: AzurePrices, capsys: pytest.CaptureFixture[str]
) -> None:
    before = SHIPPED.read_text()
    assert _run(AZURE, "--catalog", str(SHIPPED), "--url", azure.url, "--today", "2026-12-01") == 0
    assert SHIPPED.read_text() == before
    printed = tomllib.loads(capsys.readouterr().out)
    assert {r["provider"] for r in printed["instance"]} == {"azure"}
    spot = [r for r in printed["instance"] if r["market"] == "spot"]
    assert [(r["instance"], r["usd_per_hour"]) for r in spot] == [
        ("Standard_NC24ads_A100_v4", "0.7345")
    ]


def test_the_feed_cannot_be_read_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    # a loopback port nobody listens on
    assert _run(AZURE, "--url", "http://127.0.0.1:9/api/retail/prices") == 2
    assert "azure_prices:" in capsys.readouterr().err


# -- rows too old ---------------------------------------------------------------------------

AGED = """
[[price]]
provider = "aws"
model = "T4"
instance = "g4dn.xlarge"
usd_per_gpu_hour = "0.526"
market = "on-demand"
source = "a dataset"
as_of = "2026-01-21"
confidence = "third-party"

[[price]]
provider = "aws"
model = "L4"
usd_per_gpu_hour = "0.8048"
market = "on-demand"
source = "a dataset"
as_of = "2026-11-20"
confidence = "third-party"

[[instance]]
provider = "aws"
instance = "g5.xlarge"
gpu_model = "A10G"
gpus = 1
usd_per_hour = "1.006"
market = "on-demand"
source = "remembered"
confidence = "unverified"
"""


def test_the_age_check_lists_the_rows_older_than_the_age_and_the_undated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "prices.toml"
    catalog.write_text(AGED)
    argv = ["--catalog", str(catalog), "--today", "2026-11-27"]
    assert _run(AGE, *argv, "--max-age-days", "90") == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in lines[:-1]] == [
        ["instance", "aws", "g5.xlarge"],  # undated first
        ["price", "aws", "g4dn.xlarge"],
    ]
    assert "2026-01-21 (310 days)" in lines[1]
    assert lines[-1] == "2 row(s) older than 90 days on 2026-11-27"
    assert _run(AGE, *argv, "--max-age-days", "400") == 1  # the undated row stays
    catalog.write_text(AGED.split("[[instance]]")[0])
    assert _run(AGE, *argv, "--max-age-days", "400") == 0
    assert capsys.readouterr().out.endswith("no row older than 400 days on 2026-11-27\n")


def test_every_shipped_row_is_dated() -> None:
    aged = AGE.rows()
    assert len(aged) == len(load_catalog().rows) + len(load_instance_rows())
    assert all(row.as_of is not None for row in aged)
