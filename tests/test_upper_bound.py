"""No GPU that exists is priced at $0 because no price row fits it: it is priced at the
best upper bound known, labelled with why (core.catalog.upper_bound), in the meter, the
kernel's prices and the contract between them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.billing import US_PER_S, BillingRule
from jupyter_gpucost.core.catalog import MARKETS, PricePolicy, load_catalog
from jupyter_gpucost.core.gpu_models import GIB, model_for
from jupyter_gpucost.core.meter import Meter
from jupyter_gpucost.core.protocol import PricedGpu, PublishedPrices, decode_prices, encode_prices
from jupyter_gpucost.kernel.cell.prices import from_catalog, from_published
from jupyter_gpucost.telemetry.base import GpuReading

CATALOG = load_catalog()
SPOT = "spot: priced at on-demand, the most it can cost"
NVML_NAMES = (
    "NVIDIA H100 80GB HBM3",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-PCIE-40GB",
    "NVIDIA A100-SXM4",  # resolved by memory size
    "NVIDIA A10G",
    "NVIDIA L4",
    "NVIDIA L40S",
    "Tesla T4",
    "Tesla V100-SXM2-16GB",
    "NVIDIA GeForce RTX 4090",
    "NVIDIA B200",
    "NVIDIA GH200 480GB",
    "NVIDIA RTX PRO 6000 Blackwell",
)


def dearest(currency: str, model: str | None = None) -> Decimal:
    return max(
        r.per_gpu_hour
        for r in CATALOG.rows
        if r.currency == currency and (model is None or r.model == model)
    )


# -- what each path gives, and its label ---------------------------------------------------


def test_spot_is_priced_at_the_same_gpu_on_demand() -> None:
    spot = PricePolicy(catalog=CATALOG, provider="aws", market="spot", region="us-east-1")
    price = spot.price_for("NVIDIA A10G", 24 * GIB)
    on_demand = CATALOG.find(provider="aws", market="on-demand", model="A10G", region="us-east-1")
    assert price is not None
    assert on_demand is not None
    assert price.per_gpu_hour == on_demand.per_gpu_hour
    assert (price.basis, price.reason) == ("upper-bound", SPOT)
    assert price.source.startswith("upper bound: aws on-demand us-east-1 (g5.xlarge)")


def test_a_model_the_provider_does_not_price_gets_its_dearest_known_price() -> None:
    policy = PricePolicy(catalog=CATALOG, provider="gcp")
    price = policy.price_for("NVIDIA A10G", 24 * GIB)
    assert price is not None
    assert price.per_gpu_hour == dearest("USD", "A10G")
    assert price.reason.startswith(
        "no gcp on-demand price for A10G: priced at the dearest known, $"
    )


def test_an_unknown_model_gets_the_admin_s_figure_else_the_dearest_gpu() -> None:
    name = "NVIDIA RTX PRO 6000 Blackwell"
    assert model_for(name) is None
    price = PricePolicy(catalog=CATALOG).price_for(name, 96 * GIB)
    assert price is not None
    assert price.per_gpu_hour == dearest("USD")
    assert price.reason.startswith(f"no price for {name}: priced at the dearest GPU of the catalog")
    admin = PricePolicy(catalog=CATALOG, unknown_gpu_price=Decimal("7.25")).price_for(name, None)
    assert admin is not None
    assert admin.per_gpu_hour == Decimal("7.25")
    assert admin.reason == (
        f"no price for {name}: priced at c.GpuCost.unknown_gpu_usd_per_hour, $7.25/h"
    )


def test_no_conversion_a_yuan_session_is_bounded_by_yuan_prices_only() -> None:
    policy = PricePolicy(catalog=CATALOG, provider="autodl")
    assert policy.session_currency == "CNY"
    # an H100 has dollar rows, none in yuan: the dearest GPU in yuan, said in yuan
    price = policy.price_for("NVIDIA H100 80GB HBM3", 80 * GIB)
    assert price is not None
    assert price.currency == "CNY"
    assert price.per_gpu_hour == dearest("CNY")
    assert "CN¥" in price.reason
    # a currency the catalog has no price in: no bound, and start-up says which setting
    euro = PricePolicy(catalog=CATALOG, currency="EUR")
    assert euro.price_for("NVIDIA H100 80GB HBM3", None) is None
    missing = euro.bound_missing()
    assert missing is not None
    assert "c.GpuCost.unknown_gpu_usd_per_hour (in EUR)" in missing
    assert PricePolicy(catalog=CATALOG, currency="EUR", unknown_gpu_price=Decimal(3)).price_for(
        "NVIDIA H100 80GB HBM3", None
    ) == PricePolicy(catalog=CATALOG, currency="EUR", unknown_gpu_price=Decimal(3)).price_for(
        "NVIDIA H100 80GB HBM3", 0
    )


def test_a_listed_price_and_an_override_are_not_upper_bounds() -> None:
    policy = PricePolicy(
        catalog=CATALOG, provider="aws", overrides={"A10G": Decimal("0.9")}, market="spot"
    )
    override = policy.price_for("NVIDIA A10G", None)
    listed = PricePolicy(catalog=CATALOG, region="us-east-1").price_for("Tesla T4", None)
    assert override is not None
    assert listed is not None
    assert (override.basis, override.reason) == ("override", "")
    assert (listed.basis, listed.reason) == ("catalog", "")


# -- the property: a held GPU is never priced at $0/h ---------------------------------------

overrides = st.dictionaries(
    st.sampled_from([*NVML_NAMES, "H100-80GB", "A100-80GB", "T4", "L4", "A10G", "B200"]),
    st.decimals(min_value=Decimal("0.01"), max_value=Decimal(1000), places=6),
    max_size=3,
)


@settings(max_examples=400, deadline=None)
@given(
    provider=st.one_of(st.sampled_from(CATALOG.providers), st.text(min_size=1, max_size=12)),
    market=st.sampled_from(MARKETS),
    name=st.one_of(st.sampled_from(NVML_NAMES), st.text(max_size=40)),
    memory_gib=st.one_of(st.none(), st.integers(min_value=0, max_value=1024)),
    overrides=overrides,
    instance=st.sampled_from(["", "g5.xlarge", "secure", "community", "nope"]),
    currency=st.sampled_from([None, "USD", "CNY", "EUR"]),
    unknown=st.one_of(st.none(), st.decimals(min_value=Decimal("0.01"), max_value=Decimal(99))),
)
def test_a_held_gpu_is_never_priced_at_zero(
    provider: str,
    market: str,
    name: str,
    memory_gib: int | None,
    overrides: dict[str, Decimal],
    instance: str,
    currency: str | None,
    unknown: Decimal | None,
) -> None:
    policy = PricePolicy(
        catalog=CATALOG,
        provider=provider,
        market=market,
        instance=instance,
        overrides=overrides,
        currency=currency,
        unknown_gpu_price=unknown,
    )
    memory = None if memory_gib is None else memory_gib * GIB
    price = policy.price_for(name, memory)
    if policy.bound_missing() is not None:
        # the server refuses to start in this case (tests/test_config.py)
        return
    assert price is not None
    assert price.per_gpu_hour > 0
    assert price.currency == policy.session_currency
    if price.basis == "upper-bound":
        assert price.reason
        assert not price.overridden
    # over an hour the meter counts it: a budget can trip
    meter = Meter(
        policy=policy,
        rule=BillingRule(1, 0),
        sample_interval_s=1.0,
        start_us=0,
        started=datetime(2026, 11, 27, tzinfo=UTC),
    )
    reading = GpuReading(index=0, uuid="GPU-0", name=name, memory_total_bytes=memory)
    meter.update([reading], 0, datetime(2026, 11, 27, tzinfo=UTC))
    snapshot = meter.update([reading], 3600 * US_PER_S, datetime(2026, 11, 27, 1, tzinfo=UTC))
    assert snapshot.cost_micro > 0
    assert snapshot.unpriced == ()


# -- the kernel: its prices carry the label -------------------------------------------------


def test_the_kernel_s_catalog_prices_are_bounded_and_labelled() -> None:
    prices = from_catalog([("GPU-x", "NVIDIA RTX PRO 6000 Blackwell", 96 * GIB)])
    assert prices.rate_per_hour() == dearest("USD")
    assert prices.bound_reason("GPU-x").startswith(
        "no price for NVIDIA RTX PRO 6000 Blackwell: priced at the dearest GPU"
    )
    assert prices.bound_notes()[0].startswith(
        "NVIDIA RTX PRO 6000 Blackwell is priced at an upper bound: no price for"
    )


def test_the_bound_travels_from_the_server_to_its_kernels() -> None:
    published = PublishedPrices(
        gpus=(
            PricedGpu(
                "GPU-a",
                "NVIDIA A10G",
                Decimal("1.006"),
                "spot: priced at on-demand, the most it can cost",
            ),
            PricedGpu("GPU-b", "Tesla T4", Decimal("0.526")),
        ),
        base_per_hour=Decimal(0),
        currency_symbol="$",
        source="the server's aws spot prices",
    )
    raw = encode_prices(published)
    assert json.loads(raw)["gpus"][0]["upper_bound"] == {"msgid": SPOT, "values": {}}
    assert json.loads(raw)["gpus"][1]["upper_bound"] is None
    decoded = decode_prices(raw)
    assert decoded == published
    kernel = from_published(decoded)
    assert kernel.bound_reason("GPU-a") == SPOT
    assert kernel.bound_reason("GPU-b") == ""
    # an older server's payload (no "upper_bound"): read as before
    old = json.loads(raw)
    for gpu in old["gpus"]:
        del gpu["upper_bound"]
    older = decode_prices(json.dumps(old))
    assert older is not None
    assert from_published(older).bounds == {}


def test_a_row_priced_at_zero_bounds_nothing(tmp_path: Path) -> None:
    # an admin's catalog where a GPU is free at one provider: that is its price there, not
    # a bound for the others
    path = tmp_path / "prices.toml"
    path.write_text(
        "\n".join(
            f'[[price]]\nprovider = "{provider}"\nmodel = "{model}"\nmarket = "on-demand"\n'
            f'usd_per_gpu_hour = "{price}"\n'
            for provider, model, price in (
                ("lab", "A10G", "0"),
                ("cloud", "A10G", "0"),
                ("cloud", "T4", "0.5"),
            )
        )
    )
    catalog = load_catalog(path)
    assert PricePolicy(catalog, "lab").price_for("NVIDIA A10G", None) == PricePolicy(
        catalog, "lab"
    ).catalog_price("NVIDIA A10G", None)
    spot = PricePolicy(catalog, "lab", market="spot").price_for("NVIDIA A10G", None)
    assert spot is not None
    assert spot.per_gpu_hour == Decimal("0.5")
    assert spot.upper_bound
