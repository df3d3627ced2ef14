"""Keeping the catalog true: Azure's rows regenerated from its Retail Prices API (a loopback
stand-in serving recorded items; nothing here reaches the network) and the rows too old."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import unquote

import pytest
from azure_prices_standin import AzurePrices, Feed, recorded_items, serve
from cloud_standins import Cloud, StandIn, write_dmi
from cloud_standins import serve as serve_cloud
from hypothesis import given, settings
from hypothesis import strategies as st
from test_budget_api import wait_for

from jupyter_gpucost.cloud.azure_prices import (
    FeedError,
    fetch_items,
    fetch_vm_prices,
    parse_page,
    vm_prices,
)
from jupyter_gpucost.cloud.price_refresh import RefreshSettings, refresh_instance_row
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


@pytest.mark.parametrize("answer", ["<html>busy</html>", '{"Items": 3}', "[]", "[" * 100_000])
def test_an_answer_that_is_not_the_feed_s_is_an_error(answer: str) -> None:
    with pytest.raises(FeedError):
        fetch_items("https://feed.invalid/api", get=lambda url: answer)


def test_a_price_no_hour_can_cost_is_left_out() -> None:
    (item,) = [
        i
        for i in recorded_items()
        if i["meterName"] == "NC24ads A100 v4"
        and i["armRegionName"] == "eastus"
        and i["retailPrice"] == 3.673
    ]
    for huge in ("1e999999", str(10**30), "-3.673", "0"):
        text = json.dumps({"Items": [item]}).replace(
            '"retailPrice": 3.673', f'"retailPrice": {huge}'
        )
        assert huge in text
        assert vm_prices(parse_page(text)[0], "eastus") == {}


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
    # every Azure size for sale in the region asked (eastus): the provider's own figure,
    # dated, naming the meter; the other regions' rows are untouched
    for row in [r for r in rows if r.provider == "azure" and not r.not_for_sale]:
        if row.region != "eastus":
            assert row in load_instance_rows(SHIPPED), row
            continue
        assert (row.confidence, row.as_of) == ("listed", "2026-12-01"), row
        assert row.source.startswith(f"Azure Retail Prices API ({azure.url}), meter '"), row
    for price in [r for r in prices.rows if r.provider == "azure"]:
        if price.region != "eastus":
            assert price in load_catalog().rows, price
            continue
        assert (price.confidence, price.as_of) == ("listed", "2026-12-01"), price
    nc24 = prices.find(provider="azure", market="on-demand", model="A100-80GB", region="eastus")
    assert nc24 is not None
    assert nc24.per_gpu_hour == Decimal("3.673")
    nd96 = prices.find(provider="azure", market="on-demand", model="H100-80GB", region="eastus")
    assert nd96 is not None
    assert nd96.per_gpu_hour == Decimal("12.29")
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
        region="eastus",
    )
    assert plan.whole is not None
    assert plan.whole.per_gpu.per_gpu_hour == Decimal("0.7345")
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
            region="eastus",
        )
        assert row is not None
        assert (row.confidence, row.per_hour) == ("third-party", Decimal("32.77"))


US_REGIONS = Path(__file__).parent / "data" / "azure_retail_prices" / "us-regions-gpu-vms.json"


def test_every_region_the_feed_sells_gives_the_shipped_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--all-regions``: every region the feed lists the sizes in, rewritten or added; its
    rows are the rows the catalog ships for those sizes and regions."""
    regions = ("westus", "centralus")
    eastus = [i for i in recorded_items() if i["armRegionName"] == "eastus"]
    items = eastus + json.loads(US_REGIONS.read_text())["Items"]
    # the catalog without its westus rows: the script adds them back
    shipped = SHIPPED.read_text()
    kept = [
        s.text
        for s in AZURE.segments(shipped)
        if not (
            s.fields and s.fields.get("provider") == "azure" and s.fields.get("region") == "westus"
        )
    ]
    catalog = tmp_path / "prices.toml"
    catalog.write_text("".join(kept))
    assert "westus" not in {r.region for r in load_instance_rows(catalog)}
    for azure in serve(Feed(items=items)):
        code = _run(
            AZURE,
            "--catalog",
            str(catalog),
            "--url",
            azure.url,
            "--today",
            "2026-12-01",
            "--all-regions",
            "--write",
        )
        assert code == 0, capsys.readouterr().err
        # one query for every region: no armRegionName term
        assert all("armRegionName" not in unquote(a) for a in azure.feed.asked)
    rows = {(r.instance, r.region, r.market): r for r in load_instance_rows(catalog)}
    want = [r for r in load_instance_rows(SHIPPED) if r.provider == "azure" and r.region in regions]
    assert len(want) == 16
    for ours in want:
        row = rows[(ours.instance, ours.region, ours.market)]
        assert (row.per_hour, row.gpus, row.gpu_model) == (
            ours.per_hour,
            ours.gpus,
            ours.gpu_model,
        ), row
        assert (row.confidence, row.as_of) == ("listed", "2026-12-01")
    per_gpu = {
        (r.instance, r.region): r for r in load_catalog(catalog).rows if r.provider == "azure"
    }
    want_gpu = [r for r in load_catalog().rows if r.provider == "azure" and r.region in regions]
    assert len(want_gpu) == 5
    for ours_gpu in want_gpu:
        price = per_gpu[(ours_gpu.instance, ours_gpu.region)]
        assert (price.model, price.per_gpu_hour) == (ours_gpu.model, ours_gpu.per_gpu_hour)
        assert price.confidence == "listed"
    # a region the feed did not list keeps its rows
    assert rows[("Standard_NC4as_T4_v3", "westus2", "on-demand")].confidence == "third-party"


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


# -- one machine's price refreshed at start -----------------------------------------------


def _feed_with(sku: str, price: float) -> Feed:
    """The recorded items, with ``sku``'s Linux on-demand eastus price changed."""
    items = []
    for item in recorded_items():
        plain = (
            item["armSkuName"] == sku
            and item["armRegionName"] == "eastus"
            and item["meterName"] == item["skuName"]
            and not item["productName"].endswith("Windows")
            and item["type"] == "Consumption"
            and item["effectiveStartDate"].startswith("2026")
            and "Low Priority" not in item["meterName"]
            and not item["meterName"].endswith("Spot")
        )
        items.append({**item, "retailPrice": price, "unitPrice": price} if plain else item)
    return Feed(items=items)


def _refresh(feed_url: str, cache: Path, market: str = "on-demand", **kw: Any) -> Any:
    return refresh_instance_row(
        load_instance_rows(),
        provider=kw.pop("provider", "azure"),
        instance=kw.pop("instance", "Standard_ND96isr_H100_v5"),
        market=market,
        region="eastus",
        settings=RefreshSettings(enabled=True, azure_url=feed_url, cache_path=str(cache)),
        **kw,
    )


def test_a_refreshed_price_is_cached_for_an_hour_and_says_so(tmp_path: Path) -> None:
    cache = tmp_path / "prices.json"
    now = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
    for azure in serve(_feed_with("Standard_ND96isr_H100_v5", 100.0)):
        fresh = _refresh(azure.url, cache, now=now)
        assert fresh.row is not None, fresh.message
        assert (fresh.row.per_hour, fresh.row.gpus, fresh.row.gpu_model) == (
            Decimal("100"),
            8,
            "H100-80GB",
        )
        assert (fresh.row.confidence, fresh.row.as_of) == ("listed", "2026-11-27")
        assert fresh.row.source.endswith(f"refreshed from {azure.url} at 2026-11-27 09:00 UTC")
        assert len(azure.feed.asked) == 1
        # a restart within the hour: the cache, said so, and nothing asked
        later = _refresh(azure.url, cache, now=now + timedelta(minutes=50))
        assert later.row is not None
        assert later.row.per_hour == Decimal("100")
        assert later.row.source.endswith("at 2026-11-27 09:00 UTC (cached)")
        assert len(azure.feed.asked) == 1
        # an hour later: asked again
        _refresh(azure.url, cache, now=now + timedelta(hours=1, minutes=1))
        assert len(azure.feed.asked) == 2


def test_a_spot_vm_takes_its_gpus_from_the_size_s_row_and_its_price_from_the_feed(
    azure: AzurePrices, tmp_path: Path
) -> None:
    spot = _refresh(azure.url, tmp_path / "c.json", "spot", instance="Standard_NC24ads_A100_v4")
    assert spot.row is not None, spot.message
    assert (spot.row.market, spot.row.per_hour, spot.row.gpus) == (
        "spot",
        Decimal("0.7345"),
        1,
    )


def test_what_cannot_be_refreshed_keeps_the_catalog_s_price_and_says_why(
    azure: AzurePrices, tmp_path: Path
) -> None:
    cache = tmp_path / "c.json"
    cases = [
        ({"provider": "aws", "instance": "p5.48xlarge"}, "aws has no public price feed"),
        ({"instance": "Standard_NC6s_v3"}, "Standard_NC6s_v3 is not for sale (retired"),
        ({"instance": "Standard_NC999_v9"}, "the catalog has no row of Standard_NC999_v9"),
        ({"instance": "Standard_NV36ads_A10_v5", "market": "spot"}, "lists no spot price"),
    ]
    for kw, why in cases:
        market = str(kw.pop("market", "on-demand"))
        kept = _refresh(azure.url, cache, market, **kw)
        assert kept.row is None
        assert why in kept.message
    closed = _refresh("http://127.0.0.1:9/api/retail/prices", cache)
    assert closed.row is None
    assert closed.message.startswith("the price feed could not be read")


def _azure_vm(
    tmp_path: Path, imds: StandIn, feed: AzurePrices, **more: object
) -> dict[str, object]:
    imds.cloud.azure_compute["vmSize"] = "Standard_ND96isr_H100_v5"
    return {
        "telemetry": "simulated",
        "simulated_trace": "h100-live",
        "sample_interval_s": 0.2,
        "dmi_path": write_dmi(tmp_path / "dmi", "azure"),
        "azure_imds_url": imds.url,
        "azure_prices_url": feed.url,
        "price_cache_path": str(tmp_path / "cache" / "prices.json"),
        "ledger_url": "none",
        **more,
    }


class TestAnAzureVmRefreshedAtStart:
    @pytest.fixture
    def imds(self) -> Iterator[StandIn]:
        yield from serve_cloud(Cloud())

    @pytest.fixture
    def feed(self) -> Iterator[AzurePrices]:
        yield from serve(_feed_with("Standard_ND96isr_H100_v5", 100.0))

    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, imds: StandIn, feed: AzurePrices) -> dict[str, object]:
        return _azure_vm(tmp_path, imds, feed, refresh_instance_price=True)

    async def test_it_is_priced_from_the_feed_shown_as_refreshed(
        self, jp_fetch: Any, feed: AzurePrices, tmp_path: Path
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        machine = status["machine"]
        assert machine["label"] == "Standard_ND96isr_H100_v5, on-demand, eastus (detected)"
        assert machine["priced"] == "instance"
        assert machine["instance_price_usd_per_hour"] == 100.0
        assert machine["instance_price_confidence"] == "listed"
        assert f"refreshed from {feed.url} at " in machine["instance_price_source"]
        # one of the VM's eight shares
        assert status["gpus"][0]["price_usd_per_hour"] == 12.5
        assert status["gpus"][0]["price_confidence"] == "listed"
        assert (tmp_path / "cache" / "prices.json").exists()
        assert len(feed.feed.asked) == 1


class TestRefreshTurnedOff:
    @pytest.fixture
    def imds(self) -> Iterator[StandIn]:
        yield from serve_cloud(Cloud())

    @pytest.fixture
    def feed(self) -> Iterator[AzurePrices]:
        yield from serve(_feed_with("Standard_ND96isr_H100_v5", 100.0))

    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, imds: StandIn, feed: AzurePrices) -> dict[str, object]:
        return _azure_vm(tmp_path, imds, feed, refresh_instance_price=False)

    async def test_the_catalog_prices_it_and_no_feed_is_asked(
        self, jp_fetch: Any, feed: AzurePrices
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["machine"]["instance_price_usd_per_hour"] == 98.32
        assert status["machine"]["instance_price_confidence"] == "third-party"
        assert feed.feed.asked == []


class TestASpotVmByRegionAndPriorityOnByDefault:
    """Nothing set: a Spot VM (IMDS ``priority: Spot``) is priced at its own region's Spot
    meter from the recorded answers, and read again every interval."""

    @pytest.fixture
    def imds(self) -> Iterator[StandIn]:
        cloud = Cloud()
        cloud.azure_compute["priority"] = "Spot"
        yield from serve_cloud(cloud)

    @pytest.fixture
    def feed(self) -> Iterator[AzurePrices]:
        yield from serve(Feed())

    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, imds: StandIn, feed: AzurePrices) -> dict[str, object]:
        config = _azure_vm(tmp_path, imds, feed, price_reread_interval_s=1)
        imds.cloud.azure_compute["vmSize"] = "Standard_NC24ads_A100_v4"
        return {**config, "simulated_trace": "a100x2-training"}

    async def test_the_spot_meter_prices_it_and_a_new_price_applies(
        self, jp_fetch: Any, imds: StandIn, feed: AzurePrices
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        machine = status["machine"]
        assert machine["market"] == "spot"
        assert machine["instance_price_usd_per_hour"] == 0.7345
        assert machine["instance_price_market"] == "spot"
        assert machine["instance_price_region"] == "eastus"
        assert "meter 'NC24ads A100 v4 Spot'" in machine["instance_price_source"]
        # the Spot price moves: the hourly reading (here every second) applies it
        for item in feed.feed.items:
            if item["meterName"] == "NC24ads A100 v4 Spot" and item["armRegionName"] == "eastus":
                item["retailPrice"] = item["unitPrice"] = 0.9

        async def moved() -> bool:
            doc = json.loads((await jp_fetch("gpucost", "api", "status")).body)
            return bool(doc["machine"]["instance_price_usd_per_hour"] == 0.9)

        await wait_for(moved, 30, "the hourly reading's new Spot price")


# -- what a feed (or whoever answers in its place) may send -----------------------------------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
_ITEMS = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "armSkuName": st.sampled_from(["Standard_NC24ads_A100_v4", "", "x"]) | st.text(),
            "armRegionName": st.sampled_from(["eastus", "westus3"]) | _SCALARS,
            "retailPrice": _SCALARS,
            "type": st.sampled_from(["Consumption", "Reservation", "DevTestConsumption"]),
            "currencyCode": st.sampled_from(["USD", "EUR"]) | _SCALARS,
            "unitOfMeasure": st.sampled_from(["1 Hour", "1/Month"]) | _SCALARS,
            "meterName": st.text(max_size=40) | st.just("NC24ads A100 v4 Spot"),
            "skuName": st.text(max_size=40),
            "productName": st.text(max_size=40) | st.just("Virtual Machines Windows"),
            "effectiveStartDate": _SCALARS,
        },
    ),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(items=_ITEMS)
def test_any_items_give_only_positive_usd_hourly_prices_to_the_micro_dollar(
    items: list[dict[str, object]],
) -> None:
    text = json.dumps({"Items": items, "NextPageLink": None}, allow_nan=True)
    parsed, link = parse_page(text)
    assert link == ""
    for (sku, market), vm in vm_prices(parsed, "eastus").items():
        assert vm.sku == sku
        assert market in ("on-demand", "spot")
        assert vm.usd_per_hour.is_finite()
        assert vm.usd_per_hour > 0
        assert vm.usd_per_hour == vm.usd_per_hour.quantize(Decimal("0.000001"))


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_any_answer_is_a_page_or_a_feed_error(text: str) -> None:
    try:
        items, link = parse_page(text)
    except FeedError:
        return
    assert isinstance(items, list)
    assert isinstance(link, str)
