"""Currencies: catalog rows and overrides carry one, and a session shows its own, exactly."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpucost.core import currency
from jupyter_gpucost.core.catalog import CatalogError, PricePolicy, load_catalog
from jupyter_gpucost.core.money import status_bar

A100 = "NVIDIA A100-SXM4-80GB"
GIB = 1024**3


def test_the_symbols_are_those_the_browser_writes() -> None:
    assert currency.symbol("USD") == "$"
    assert currency.symbol("EUR") == "€"
    assert currency.symbol("CNY") == "CN¥"
    assert currency.symbol("CNY", "zh_CN") == "¥"
    assert currency.symbol("CNY", "zh-CN") == "¥"
    assert currency.symbol("CHF") == "CHF "


def test_autodl_and_alibaba_prices_are_in_yuan_with_source_date_and_confidence() -> None:
    catalog = load_catalog()
    assert catalog.currency_of("autodl") == "CNY"
    assert catalog.currency_of("alibaba") == "CNY"
    assert catalog.currency_of("aws") == "USD"
    for row in catalog.rows:
        if row.provider in ("autodl", "alibaba"):
            assert row.currency == "CNY"
            assert row.source
            assert row.as_of
            assert row.confidence
    price = PricePolicy(catalog=catalog, provider="autodl").price_for(A100, 80 * GIB)
    assert price is not None
    assert (price.per_gpu_hour, price.currency) == (Decimal("7.98"), "CNY")
    rtx = PricePolicy(catalog=catalog, provider="autodl").price_for(
        "NVIDIA GeForce RTX 4090", 24 * GIB
    )
    assert rtx is not None
    assert rtx.model == "RTX-4090"


def test_a_catalog_price_in_another_currency_is_never_used() -> None:
    catalog = load_catalog()
    policy = PricePolicy(catalog=catalog, provider="aws", currency="EUR")
    assert policy.session_currency == "EUR"
    assert policy.price_for(A100, 80 * GIB) is None
    overridden = PricePolicy(
        catalog=catalog, provider="aws", currency="EUR", overrides={"A100-80GB": Decimal("3")}
    ).price_for(A100, 80 * GIB)
    assert overridden is not None
    assert overridden.currency == "EUR"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('usd_per_gpu_hour = "1"\ncurrency = "CNY"', "is written price_per_gpu_hour"),
        ('price_per_gpu_hour = "1"\ncurrency = "yuan"', "not an ISO 4217 code"),
        ('price_per_gpu_hour = "1"\nusd_per_gpu_hour = "1"', "has both"),
        ('currency = "CNY"', "missing price_per_gpu_hour"),
    ],
)
def test_a_row_says_its_currency_honestly(tmp_path: Path, row: str, message: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(f'[[price]]\nprovider = "x"\nmodel = "T4"\nmarket = "on-demand"\n{row}\n')
    with pytest.raises(CatalogError, match=message):
        load_catalog(path)


def test_one_provider_has_one_currency(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    rows = [
        ("T4", 'usd_per_gpu_hour = "1"'),
        ("L4", 'price_per_gpu_hour = "7"\ncurrency = "CNY"'),
    ]
    path.write_text(
        "".join(
            f'[[price]]\nprovider = "x"\nmodel = "{m}"\nmarket = "on-demand"\n{r}\n'
            for m, r in rows
        )
    )
    with pytest.raises(CatalogError, match="one provider's prices must be in one currency"):
        load_catalog(path)


class TestAutodlSession:
    """``c.GpuCost.price_provider = "autodl"``: the API speaks yuan, exactly."""

    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "price_provider": "autodl",
            "minimum_charge_s": 0,
        }

    @pytest.mark.usefixtures("jp_serverapp")
    async def test_the_status_is_in_yuan(self, jp_fetch: Any) -> None:
        response = await jp_fetch("gpucost", "api", "status")
        status = json.loads(response.body)
        assert status["currency"] == "CNY"
        assert status["currency_symbol"] == "CN¥"
        assert status["prices"]["provider"] == "autodl"
        assert [g["price_usd_per_hour"] for g in status["gpus"]] == [7.98, 7.98]
        assert status["rate_usd_per_hour"] == 15.96
        # exact: the cost is whole micro-yuan, 15.96 CNY/h over the billed seconds
        cost = Decimal(str(status["cost_usd"]))
        assert cost == cost.quantize(Decimal("0.000001"))
        assert status_bar(cost, status["currency_symbol"]).startswith(("CN¥", "< CN¥"))
        assert not [w for w in status["warnings"] if w["code"] == "unpriced-gpu"]
        # the shipped yuan rows are unverified: the warning says so, in yuan
        unverified = [w["message"] for w in status["warnings"] if w["code"] == "price-unverified"]
        assert unverified
        assert "(A100-80GB, CN¥7.98/h) is unverified" in unverified[0]

    @pytest.mark.usefixtures("jp_serverapp")
    async def test_the_metrics_name_the_currency(self, jp_fetch: Any) -> None:
        await jp_fetch("gpucost", "api", "status")
        text = (await jp_fetch("metrics")).body.decode()
        assert 'jupyter_gpucost_currency_info{currency="CNY",user=""} 1.0' in text


class TestCurrencyWithoutCatalogPrices:
    """No catalog price in euros: the admin's price for an unknown GPU bounds them (a
    server without it refuses to start: tests/test_config.py)."""

    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        return {"telemetry": "simulated", "currency": "EUR", "unknown_gpu_usd_per_hour": 9.5}

    @pytest.mark.usefixtures("jp_serverapp")
    async def test_gpus_are_priced_at_the_admin_s_bound_and_the_warning_names_the_currency(
        self, jp_fetch: Any
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert (status["currency"], status["currency_symbol"]) == ("EUR", "€")
        assert [g["price_usd_per_hour"] for g in status["gpus"]] == [9.5, 9.5]
        assert [g["price_basis"] for g in status["gpus"]] == ["upper-bound"] * 2
        assert status["price_basis"] == "upper-bound"
        assert status["price_basis_reasons"] == [
            "no price for A100-80GB: priced at c.GpuCost.unknown_gpu_usd_per_hour, €9.50/h"
        ]
        assert status["rate_usd_per_hour"] == 19.0
        assert "<EUR per hour>" in status["warnings"][0]["message"]


def test_the_hub_pages_write_amounts_by_the_money_rule_in_the_hubs_currency() -> None:
    from jupyter_gpucost.hub.web import handlers

    env = handlers.templates("CN¥")
    page = env.from_string(
        '{% import "gpucost_page.html" as page with context %}'
        "{{ page.money(12.5) }} {{ page.money(0.00002) }} {{ page.money(0) }}"
    )
    # HTML-escaped: the browser shows "< CN¥0.0001"
    assert page.render(static_url=lambda *a, **k: "", service_url="/") == (
        "CN¥12.50 &lt; CN¥0.0001 CN¥0.00"
    )
