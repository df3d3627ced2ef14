"""The price catalog: every GPU gets the price a user would look up, or a visible 'unpriced'."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from jupyter_gpucost.core.catalog import (
    CatalogError,
    PricePolicy,
    load_catalog,
    model_for,
    parse_price,
)

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


def test_shipped_catalog_keeps_source_and_date_of_every_row() -> None:
    catalog = load_catalog()
    assert len(catalog.rows) >= 20
    assert {"aws", "gcp", "azure", "lambda", "runpod"} <= set(catalog.providers)
    for row in catalog.rows:
        assert row.source, row
        assert row.usd_per_gpu_hour > 0, row
        assert row.as_of or row.confidence != "listed", row
    # the default provider prices every GPU model a user is likely to rent on it, from list prices
    aws = {r.model: r for r in catalog.rows if r.provider == "aws" and r.market == "on-demand"}
    assert set(aws) >= {"T4", "L4", "A10G", "V100", "A100-40GB", "A100-80GB", "H100-80GB", "H200"}
    assert {r.confidence for r in aws.values()} == {"listed"}
    assert aws["H100-80GB"].usd_per_gpu_hour == Decimal("6.88")
    assert aws["H100-80GB"].as_of == "2026-01-21"


def test_policy_prices_a_device_from_the_catalog() -> None:
    policy = PricePolicy(catalog=load_catalog(), provider="aws", market="on-demand")
    price = policy.price_for("NVIDIA A100-SXM4-80GB", 80 * GIB)
    assert price is not None
    assert price.usd_per_gpu_hour == Decimal("3.431")
    assert price.as_of == "2026-01-21"
    assert "aws on-demand" in price.source


def test_unknown_device_or_missing_market_is_an_upper_bound_not_zero() -> None:
    catalog = load_catalog()
    unknown = PricePolicy(catalog=catalog).price_for("NVIDIA GeForce RTX 4090", 24 * GIB)
    assert unknown is not None
    assert unknown.upper_bound
    assert unknown.usd_per_gpu_hour == max(
        r.usd_per_gpu_hour for r in catalog.rows if r.currency == "USD"
    )
    # there is no AWS spot price in the catalog: on-demand, labelled as the most it costs
    spot = PricePolicy(catalog=catalog, provider="aws", market="spot")
    bound = spot.price_for("NVIDIA H100 80GB HBM3", 80 * GIB)
    assert bound is not None
    assert bound.upper_bound
    assert bound.reason == "spot: priced at on-demand, the most it can cost"
    on_demand = PricePolicy(catalog=catalog, provider="aws").price_for("NVIDIA H100 80GB HBM3", 0)
    assert on_demand is not None
    assert bound.usd_per_gpu_hour == on_demand.usd_per_gpu_hour
    gcp_spot = PricePolicy(catalog=catalog, provider="gcp", market="spot")
    price = gcp_spot.price_for("NVIDIA H100 80GB HBM3", 80 * GIB)
    assert price is not None
    assert price.usd_per_gpu_hour == Decimal("6.57")


def test_instance_picks_among_rows_of_one_provider() -> None:
    catalog = load_catalog()
    first = PricePolicy(catalog=catalog, provider="runpod").price_for("NVIDIA H100 80GB HBM3", None)
    secure = PricePolicy(catalog=catalog, provider="runpod", instance="secure").price_for(
        "NVIDIA H100 80GB HBM3", None
    )
    assert first is not None
    assert secure is not None
    assert first.usd_per_gpu_hour == Decimal("2.69")
    assert secure.usd_per_gpu_hour == Decimal("3.49")


def test_overrides_by_model_and_by_nvml_name_beat_the_catalog() -> None:
    policy = PricePolicy(
        catalog=load_catalog(),
        overrides={"A100-80GB": Decimal("2.10"), "NVIDIA RTX A4000": Decimal("0.44")},
    )
    a100 = policy.price_for("NVIDIA A100-SXM4-80GB", 80 * GIB)
    assert a100 is not None
    assert a100.usd_per_gpu_hour == Decimal("2.10")
    assert a100.overridden
    rtx = policy.price_for("NVIDIA RTX A4000", 16 * GIB)
    assert rtx is not None
    assert rtx.usd_per_gpu_hour == Decimal("0.44")
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


def test_a_price_from_an_unverified_row_is_flagged_in_the_status() -> None:
    from datetime import UTC, datetime

    from jupyter_gpucost.core.billing import BillingRule
    from jupyter_gpucost.core.meter import Meter
    from jupyter_gpucost.server.status import status_payload
    from jupyter_gpucost.telemetry.base import GpuReading, TelemetryStatus

    # the catalog's GCP L4 price is remembered, not checked ("unverified")
    policy = PricePolicy(catalog=load_catalog(), provider="gcp")
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
    assert status["gpus"][0]["price_usd_per_hour"] == 0.71
    assert status["gpus"][0]["price_confidence"] == "unverified"
    assert status["prices"]["as_of"] is None  # the row is undated
    (warning,) = status["warnings"]
    assert warning["code"] == "price-unverified"
    assert "unverified: check it against your bill" in warning["message"]
