"""The price catalog: every GPU gets the price a user would look up, or a visible 'unpriced'."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpucost.core.attached_gpus import load_vm_rows
from jupyter_gpucost.core.catalog import (
    DOUBTFUL_CONFIDENCE,
    CatalogError,
    PricePolicy,
    PriceRow,
    load_catalog,
    parse_price,
    read_catalog_toml,
)
from jupyter_gpucost.core.catalog_file import CONFIDENCE_LEVELS
from jupyter_gpucost.core.gpu_models import model_for
from jupyter_gpucost.core.instance_prices import load_instance_rows

GIB = 1024**3


@pytest.mark.parametrize(
    ("nvml_name", "memory", "model"),
    [
        ("NVIDIA A100-SXM4-80GB", 80 * GIB, "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", 40 * GIB, "A100-40GB"),
        ("NVIDIA A100 80GB PCIe", 80 * GIB, "A100-80GB"),
        ("NVIDIA A100-PCIE-40GB", 40 * GIB, "A100-40GB"),
        ("NVIDIA A100-SXM4", 80 * GIB, "A100-80GB"),  # no size in the name: use memory
        ("NVIDIA A100-SXM4", 40 * GIB, "A100-40GB"),
        ("NVIDIA A100-SXM4", None, None),  # ambiguous and no memory: do not guess
        ("Tesla T4", 15 * GIB, "T4"),
        ("NVIDIA T4", 15 * GIB, "T4"),
        ("NVIDIA L4", 22 * GIB, "L4"),
        ("NVIDIA L40S", 45 * GIB, "L40S"),
        ("NVIDIA A10G", 23 * GIB, "A10G"),
        ("NVIDIA A10", 23 * GIB, "A10"),
        ("Tesla V100-SXM2-16GB", 16 * GIB, "V100"),
        ("Tesla P100-PCIE-16GB", 16 * GIB, "P100"),
        ("Tesla P4", 8 * GIB, "P4"),
        ("Tesla P40", 24 * GIB, None),  # not the P4: no row prices it
        ("NVIDIA H100 80GB HBM3", 80 * GIB, "H100-80GB"),
        ("NVIDIA H100 PCIe", 80 * GIB, "H100-80GB"),
        ("NVIDIA H100 NVL", 94 * GIB, "H100-NVL"),
        ("NVIDIA H200", 141 * GIB, "H200"),
        ("NVIDIA H200 NVL", 141 * GIB, "H200-NVL"),
        ("NVIDIA GeForce RTX 4090", 24 * GIB, "RTX-4090"),
        ("NVIDIA GeForce RTX 3090", 24 * GIB, "RTX-3090"),
        ("NVIDIA T400", 2 * GIB, None),
    ],
)
def test_nvml_names_map_to_catalog_models(
    nvml_name: str, memory: int | None, model: str | None
) -> None:
    assert model_for(nvml_name, memory) == model


#: where a provider publishes its own prices: a ``listed`` row's source names one of them
PROVIDER_PAGES = {
    "aws": ("aws.amazon.com", "pricing.us-east-1.amazonaws.com"),
    "gcp": ("cloud.google.com", "cloudbilling.googleapis.com"),
    "azure": ("prices.azure.com", "azure.microsoft.com"),
    "lambda": ("lambda.ai", "cloud.lambda.ai"),
    "runpod": ("runpod.io",),
    "alibaba": ("aliyun.com", "alibabacloud.com"),
    "autodl": ("autodl.com",),
}
#: words of a figure nobody checked
UNCHECKED = ("remembered", "recollection", "not checked")


def _raw_rows() -> list[tuple[str, dict[str, object]]]:
    data, _ = read_catalog_toml()
    rows: list[tuple[str, dict[str, object]]] = []
    for kind in ("price", "instance", "vm"):
        table = data[kind]
        assert isinstance(table, list)
        rows += [(f"{kind} row {i}", raw) for i, raw in enumerate(table, 1)]
    return rows


def test_every_row_has_a_source_a_date_and_the_label_its_evidence_supports() -> None:
    data, _ = read_catalog_toml()
    catalog_date = date.fromisoformat(str(data["catalog_date"]))
    rows = _raw_rows()
    assert len(rows) == len(load_catalog().rows) + len(load_instance_rows()) + len(load_vm_rows())
    for where, raw in rows:
        what = f"{where}: {raw}"
        source = str(raw.get("source", ""))
        assert source, what
        # a date the figure was seen, no later than the catalog
        assert date.fromisoformat(str(raw.get("as_of", ""))) <= catalog_date, what
        confidence = raw.get("confidence")
        assert confidence in CONFIDENCE_LEVELS, what
        unchecked = any(word in source for word in UNCHECKED)
        if confidence == "listed":
            # the provider's own page or API
            assert any(page in source for page in PROVIDER_PAGES[str(raw["provider"])]), what
            assert not unchecked, what
        elif confidence == "third-party":
            # a named dataset: a repository (owner/name) or a page, never a memory
            assert re.search(r"[\w.-]+/[\w.-]+", source), what
            assert not unchecked, what
        else:
            # nothing checked: the row says what was tried
            assert "tried" in str(raw.get("note", "")), what
        # exact money: at most six decimals, one currency per provider (loaders check it)
        amount = next(
            str(raw[k])
            for k in ("usd_per_gpu_hour", "price_per_gpu_hour", "usd_per_hour", "price_per_hour")
            if k in raw
        )
        assert parse_price(amount, what=where) > 0, what


def test_the_rows_found_wrong_are_corrected() -> None:
    catalog = load_catalog()

    def row(provider: str, model: str, instance: str, region: str = "") -> PriceRow:
        found = catalog.find(
            provider=provider, market="on-demand", model=model, instance=instance, region=region
        )
        assert found is not None
        assert found.instance == instance
        return found

    gn7i = row("alibaba", "A10", "ecs.gn7i-c8g1.2xlarge")
    assert (gn7i.per_gpu_hour, gn7i.currency, gn7i.confidence) == (
        Decimal("9.6166"),
        "CNY",
        "third-party",
    )
    assert row("alibaba", "T4", "ecs.gn6i-c4g1.xlarge").per_gpu_hour == Decimal("11.714")
    secure_h100 = row("runpod", "H100-80GB", "secure")
    assert (secure_h100.per_gpu_hour, secure_h100.as_of) == (Decimal("3.99"), "2026-11-09")
    assert row("runpod", "A100-80GB", "secure").per_gpu_hour == Decimal("1.79")
    # Lambda's instance types as Lambda names them
    assert row("lambda", "H100-80GB", "gpu_1x_h100_sxm5").per_gpu_hour == Decimal("4.29")
    assert row("lambda", "H100-80GB", "gpu_1x_h100_pcie").per_gpu_hour == Decimal("3.29")
    # the Azure T4 row cites a source that has it
    assert "skypilot-catalog" in row("azure", "T4", "NC4as_T4_v3").source
    # GCP's on-demand H100 is priced from a shape sold on demand
    h100 = row("gcp", "H100-80GB", "a3-highgpu-8g", "us-central1")
    assert h100.per_gpu_hour == Decimal("11.06125")
    # nothing could be checked for AutoDL: said so, and warned about
    assert {r.confidence for r in catalog.rows if r.provider == "autodl"} == {"unverified"}


def test_the_default_provider_prices_every_gpu_people_rent_on_it() -> None:
    catalog = load_catalog()
    rows = [r for r in catalog.rows if r.provider == "aws" and r.market == "on-demand"]
    # the default region's row of each model (other regions have rows of their own)
    aws = {r.model: r for r in rows if r.region == "us-east-1"}
    assert set(aws) >= {"T4", "L4", "A10G", "V100", "A100-40GB", "A100-80GB", "H100-80GB", "H200"}
    # checked against a named dataset, in every region: no warning in the UI
    assert {r.confidence for r in rows} == {"third-party"}
    assert not set(DOUBTFUL_CONFIDENCE) & {r.confidence for r in rows}
    assert aws["H100-80GB"].per_gpu_hour == Decimal("6.88")
    assert aws["H100-80GB"].as_of == "2026-01-21"


def test_policy_prices_a_device_from_the_catalog() -> None:
    policy = PricePolicy(
        catalog=load_catalog(), provider="aws", market="on-demand", region="us-east-1"
    )
    price = policy.price_for("NVIDIA A100-SXM4-80GB", 80 * GIB)
    assert price is not None
    assert price.per_gpu_hour == Decimal("3.431")
    assert price.as_of == "2026-01-21"
    assert "aws on-demand" in price.source
    # where it applies, for the panel's line "A100-80GB: $3.43 per GPU-hour — AWS list
    # price, us-east-1, 2026-01-21"
    assert (price.provider, price.market, price.region) == ("aws", "on-demand", "us-east-1")


def test_unknown_device_or_missing_market_is_an_upper_bound_not_zero() -> None:
    catalog = load_catalog()
    unknown = PricePolicy(catalog=catalog).price_for("NVIDIA GeForce RTX 3090", 24 * GIB)
    assert unknown is not None
    assert unknown.upper_bound
    assert unknown.per_gpu_hour == max(r.per_gpu_hour for r in catalog.rows if r.currency == "USD")
    # there is no AWS spot price in the catalog: on-demand, labelled as the most it costs
    spot = PricePolicy(catalog=catalog, provider="aws", market="spot", region="us-east-1")
    bound = spot.price_for("NVIDIA H100 80GB HBM3", 80 * GIB)
    assert bound is not None
    assert bound.upper_bound
    assert bound.reason == "spot: priced at on-demand, the most it can cost"
    on_demand = PricePolicy(catalog=catalog, provider="aws", region="us-east-1").price_for(
        "NVIDIA H100 80GB HBM3", 0
    )
    assert on_demand is not None
    assert bound.per_gpu_hour == on_demand.per_gpu_hour
    gcp_spot = PricePolicy(catalog=catalog, provider="gcp", market="spot", region="us-central1")
    price = gcp_spot.price_for("NVIDIA H100 80GB HBM3", 80 * GIB)
    assert price is not None
    assert price.per_gpu_hour == Decimal("6.57")


def test_instance_picks_among_rows_of_one_provider() -> None:
    catalog = load_catalog()
    first = PricePolicy(catalog=catalog, provider="runpod").price_for("NVIDIA H100 80GB HBM3", None)
    secure = PricePolicy(catalog=catalog, provider="runpod", instance="secure").price_for(
        "NVIDIA H100 80GB HBM3", None
    )
    assert first is not None
    assert secure is not None
    assert first.per_gpu_hour == Decimal("2.69")
    assert secure.per_gpu_hour == Decimal("3.99")


def test_overrides_by_model_and_by_nvml_name_beat_the_catalog() -> None:
    policy = PricePolicy(
        catalog=load_catalog(),
        overrides={"A100-80GB": Decimal("2.10"), "NVIDIA RTX A4000": Decimal("0.44")},
    )
    a100 = policy.price_for("NVIDIA A100-SXM4-80GB", 80 * GIB)
    assert a100 is not None
    assert a100.per_gpu_hour == Decimal("2.10")
    assert a100.overridden
    # an override applies nowhere in particular: the panel names it the admin's price
    assert (a100.provider, a100.market, a100.region) == ("", "", "")
    rtx = policy.price_for("NVIDIA RTX A4000", 16 * GIB)
    assert rtx is not None
    assert rtx.per_gpu_hour == Decimal("0.44")
    assert rtx.model == "NVIDIA RTX A4000"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "must be a finite number >= 0"),
        ("abc", "is not a number"),
        ("NaN", "must be a finite number"),
        ("1.0000001", "more than 6 decimals"),
        (True, "expected a number"),
        ([1], "expected a number"),
    ],
)
def test_bad_prices_are_refused_with_a_reason(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_price(value, what="price")


def test_prices_are_read_exactly() -> None:
    assert parse_price(0.1, what="x") == Decimal("0.1")
    assert parse_price("2.745", what="x") == Decimal("2.745")


def test_a_broken_catalog_says_which_row(tmp_path: Path) -> None:
    bad = tmp_path / "prices.toml"
    bad.write_text(
        '[[price]]\nprovider="x"\nmodel="T4"\nusd_per_gpu_hour="1"\nmarket="on-demand"\n'
        '[[price]]\nprovider="x"\nmodel="T4"\nusd_per_gpu_hour="1"\nmarket="reserved"\n'
    )
    with pytest.raises(CatalogError, match=r"price row 2: market 'reserved'"):
        load_catalog(bad)
    bad.write_text("not toml [")
    with pytest.raises(CatalogError, match="not valid TOML"):
        load_catalog(bad)
    with pytest.raises(CatalogError, match="cannot read"):
        load_catalog(tmp_path / "missing.toml")


#: one row of an admin's own catalog, less its price
ROW = '[[price]]\nprovider="x"\nmodel="T4"\nmarket="on-demand"\n'


def test_the_catalog_is_parsed_once_and_an_edited_file_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jupyter_gpucost.core import catalog_file

    parsed: list[int] = []
    real = catalog_file.tomllib.loads

    def counting(text: str) -> dict[str, Any]:
        parsed.append(len(text))
        return real(text)

    monkeypatch.setattr(catalog_file, "_parsed", {})
    monkeypatch.setattr(catalog_file.tomllib, "loads", counting)
    # a server's start: its three tables from one parse of the shipped catalog
    catalog = load_catalog()
    rows = load_instance_rows()
    vms = load_vm_rows()
    assert len(parsed) == 1
    assert catalog.rows
    assert rows
    assert vms
    # an admin's own catalog, edited between two reads, is read as it is now
    own = tmp_path / "prices.toml"
    own.write_text(f'{ROW}usd_per_gpu_hour="1"\n')
    assert load_catalog(own).rows[0].per_gpu_hour == Decimal("1")
    own.write_text(f'{ROW}usd_per_gpu_hour="2"\n')
    assert load_catalog(own).rows[0].per_gpu_hour == Decimal("2")
    assert len(parsed) == 3
    # the shipped one still is not parsed again
    load_catalog()
    assert len(parsed) == 3


OLD_CATALOG = """
[[price]]
provider = "gcp"
model = "L4"
instance = "g2-standard-4"
usd_per_gpu_hour = "0.71"
market = "on-demand"
source = "inferred"
confidence = "uncertain"
"""


def _l4_status(policy: PricePolicy) -> dict[str, Any]:
    """The status document of a server with one NVIDIA L4 priced by ``policy``."""
    from datetime import UTC, datetime

    from jupyter_gpucost.core.billing import BillingRule
    from jupyter_gpucost.core.meter import Meter
    from jupyter_gpucost.server.status import status_payload
    from jupyter_gpucost.telemetry.base import GpuReading, TelemetryStatus

    meter = Meter(
        policy=policy,
        rule=BillingRule(1, 60),
        sample_interval_s=1.0,
        start_us=0,
        started=datetime(2026, 11, 22, tzinfo=UTC),
    )
    snapshot = meter.update(
        [GpuReading(index=0, uuid="GPU-l4", name="NVIDIA L4", utilization_pct=50.0)],
        1_000_000,
        datetime(2026, 11, 22, tzinfo=UTC),
    )
    status = status_payload(
        snapshot,
        TelemetryStatus(source="nvml", simulated=False, available=True),
        policy=policy,
        rule=BillingRule(1, 60),
        currency="USD",
        currency_symbol="$",
    )
    return status


def test_a_label_that_is_no_level_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(OLD_CATALOG.replace('"uncertain"', '"guessed"'))
    with pytest.raises(
        CatalogError, match="price row 1: confidence 'guessed' is not one of listed, third-party"
    ):
        load_catalog(path)


def test_an_old_catalog_s_uncertain_row_loads_as_unverified_and_is_flagged(
    tmp_path: Path,
) -> None:
    # an admin's catalog from before the labels meant what was checked
    path = tmp_path / "prices.toml"
    path.write_text(OLD_CATALOG)
    policy = PricePolicy(catalog=load_catalog(path), provider="gcp")
    status = _l4_status(policy)
    assert status["gpus"][0]["price_usd_per_hour"] == 0.71
    assert status["gpus"][0]["price_confidence"] == "unverified"
    assert status["prices"]["as_of"] is None  # the row is undated
    (warning,) = status["warnings"]
    assert warning["code"] == "price-unverified"
    assert "unverified: check it against your bill" in warning["message"]
    # the price as every surface writes it, not "0.71 USD/h"
    assert "(L4, $0.71/h) is unverified" in warning["message"]


def test_a_shipped_third_party_price_carries_no_warning() -> None:
    # the GCP L4 price was "remembered" before; it is now checked against a named dataset
    policy = PricePolicy(catalog=load_catalog(), provider="gcp", region="us-central1")
    status = _l4_status(policy)
    assert status["gpus"][0]["price_usd_per_hour"] == 0.70683
    assert status["gpus"][0]["price_confidence"] == "third-party"
    assert status["prices"]["as_of"] == "2026-07-30"
    assert status["warnings"] == []
    gpu = status["gpus"][0]
    # where the price applies, for the panel's one-line price
    assert gpu["price_provider"] == "gcp"
    assert gpu["price_market"] == "on-demand"
    assert gpu["price_region"]
