"""Prices per region: the detected machine's region selects its catalog row.

A real server on simulated GPUs, detected through the AWS and Azure metadata stand-ins
(loopback, the documented identity document and compute shapes), is priced from its own
region's row, labelled with the region and the row's date; a region without a row is priced
at the dearest region's row, labelled as an upper bound naming both regions. Without a
detected machine, ``c.GpuCost.price_region`` names the region; without one, the dearest
region's price, labelled. The hub's ``c.GpuCostHub.price_region`` does the same for
profiles.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, StandIn, serve, write_dmi
from hypothesis import given
from hypothesis import strategies as st
from test_upper_bound_server import status, write_trace

from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.core.instance_prices import (
    AdminPrices,
    find_instance,
    load_instance_rows,
    plan_prices,
)
from jupyter_gpucost.hub import check_command as check_profiles

CATALOG = load_catalog()
ROWS = load_instance_rows()
HUB_CONFIG = Path(__file__).parent / "data" / "profiles" / "jupyterhub_config.py"


def _row(provider: str, instance: str, region: str) -> Decimal:
    """The shipped whole-instance price of ``instance`` in ``region`` (exactly that row)."""
    rows = [
        r
        for r in ROWS
        if (r.provider, r.instance, r.market, r.region) == (provider, instance, "on-demand", region)
    ]
    assert len(rows) == 1, (provider, instance, region)
    return rows[0].per_hour


def _dearest(provider: str, instance: str) -> tuple[Decimal, str]:
    rows = [
        r for r in ROWS if (r.provider, r.instance, r.market) == (provider, instance, "on-demand")
    ]
    best = max(rows, key=lambda r: r.per_hour)
    return best.per_hour, best.region


def _config(tmp_path: Path, name: str, memory_gib: int) -> dict[str, object]:
    return {
        "telemetry": "simulated",
        "simulated_trace": write_trace(tmp_path / "trace", name, memory_gib),
        "sample_interval_s": 0.2,
        "ledger_url": "none",
    }


# -- AWS: a g5.xlarge detected in eu-west-1, ap-northeast-1, and a region with no row -----


@pytest.fixture(params=["eu-west-1", "ap-northeast-1", "af-south-1"])
def aws_region(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def aws_standin(aws_region: str) -> Iterator[StandIn]:
    cloud = Cloud()
    cloud.aws_identity.update(
        instanceType="g5.xlarge", region=aws_region, availabilityZone=f"{aws_region}a"
    )
    yield from serve(cloud)


class TestAnAwsMachineIsPricedInItsRegion:
    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, aws_standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", aws_standin.url)
        dmi = write_dmi(tmp_path / "dmi", "aws")
        (Path(dmi) / "product_name").write_text("g5.xlarge\n")
        return {**_config(tmp_path, "NVIDIA A10G", 24), "dmi_path": dmi}

    async def test_the_region_s_row_or_the_labelled_dearest(
        self, jp_fetch: Any, aws_region: str
    ) -> None:
        doc = await status(jp_fetch)
        machine = doc["machine"]
        assert (machine["instance_type"], machine["region"]) == ("g5.xlarge", aws_region)
        gpu = doc["gpus"][0]
        if aws_region == "af-south-1":
            # the catalog has no g5.xlarge in Cape Town: the dearest region's, labelled
            price, where = _dearest("aws", "g5.xlarge")
            assert where == "sa-east-1"
            assert gpu["price_usd_per_hour"] == float(price)
            assert gpu["price_basis"] == "upper-bound"
            assert gpu["price_basis_reason"] == (
                "no aws on-demand price in af-south-1: priced at the dearest region's, "
                f"sa-east-1 (as of 2026-08-26), ${price}/h"
            )
            assert machine["instance_price_basis"] == "upper-bound"
            assert machine["instance_price_region"] == "sa-east-1"
            assert "price-upper-bound" in [w["code"] for w in doc["warnings"]]
            return
        price = _row("aws", "g5.xlarge", aws_region)
        assert price != _row("aws", "g5.xlarge", "us-east-1")
        assert gpu["price_usd_per_hour"] == float(price)
        assert gpu["price_basis"] == "catalog"
        assert gpu["price_basis_reason"] is None
        # the label names the region and the date of the price
        assert machine["instance_price_region"] == aws_region
        assert machine["instance_price_as_of"] == "2026-08-26"
        assert f"aws g5.xlarge on-demand {aws_region}:" in gpu["price_source"]
        assert "as of 2026-08-26" in gpu["price_source"]
        assert "price-upper-bound" not in [w["code"] for w in doc["warnings"]]


# -- Azure: a Standard_NC24ads_A100_v4 in westus ------------------------------------------


class TestAnAzureVmIsPricedInItsRegion:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        cloud = Cloud()
        cloud.azure_compute["location"] = "westus"
        yield from serve(cloud)

    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, standin: StandIn) -> dict[str, object]:
        return {
            **_config(tmp_path, "NVIDIA A100 80GB PCIe", 80),
            "dmi_path": write_dmi(tmp_path / "dmi", "azure"),
            "azure_imds_url": standin.url,
            "azure_management_url": standin.url,
        }

    async def test_westus_row(self, jp_fetch: Any) -> None:
        doc = await status(jp_fetch)
        machine = doc["machine"]
        assert (machine["provider"], machine["region"]) == ("azure", "westus")
        price = _row("azure", "Standard_NC24ads_A100_v4", "westus")
        assert price != _row("azure", "Standard_NC24ads_A100_v4", "eastus")
        gpu = doc["gpus"][0]
        assert gpu["price_usd_per_hour"] == float(price)
        assert gpu["price_basis"] == "catalog"
        assert machine["instance_price_region"] == "westus"
        assert "Standard_NC24ads_A100_v4 on-demand westus:" in gpu["price_source"]


# -- no machine detected: the admin's price_region, else the labelled dearest -------------


class TestTheAdminNamesTheRegion:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path) -> dict[str, object]:
        return {
            **_config(tmp_path, "NVIDIA A10G", 24),
            "price_provider": "aws",
            "price_instance": "g5.xlarge",
            "price_region": "eu-west-1",
        }

    async def test_priced_at_that_region_s_row(self, jp_fetch: Any) -> None:
        gpu = (await status(jp_fetch))["gpus"][0]
        row = CATALOG.find(
            provider="aws",
            market="on-demand",
            model="A10G",
            instance="g5.xlarge",
            region="eu-west-1",
        )
        assert row is not None
        assert row.region == "eu-west-1"
        assert gpu["price_usd_per_hour"] == float(row.per_gpu_hour)
        assert (gpu["price_basis"], gpu["price_region"]) == ("catalog", "eu-west-1")
        assert "aws on-demand eu-west-1 (g5.xlarge), as of 2026-08-26" in gpu["price_source"]


class TestNoRegionIsKnown:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path) -> dict[str, object]:
        return {**_config(tmp_path, "NVIDIA A10G", 24), "price_provider": "aws"}

    async def test_priced_at_the_dearest_region_labelled(self, jp_fetch: Any) -> None:
        gpu = (await status(jp_fetch))["gpus"][0]
        dearest = max(
            (r for r in CATALOG.rows if (r.provider, r.model) == ("aws", "A10G")),
            key=lambda r: r.per_gpu_hour,
        )
        assert gpu["price_usd_per_hour"] == float(dearest.per_gpu_hour)
        assert gpu["price_basis"] == "upper-bound"
        assert gpu["price_basis_reason"] == (
            "region not known: priced at the dearest region's aws on-demand price, "
            f"{dearest.region} (as of {dearest.as_of}), ${dearest.per_gpu_hour}/h"
        )


# -- the hub: c.GpuCostHub.price_region -----------------------------------------------------


def _check(tmp_path: Path, config: str) -> str:
    (tmp_path / "gpucost_hub_config.py").write_text(config)
    out, err = io.StringIO(), io.StringIO()
    check_profiles.main(["--config", str(tmp_path / "gpucost_hub_config.py")], out, err)
    return out.getvalue()


def _a10g_line(output: str) -> str:
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("  ") if c.strip()]
        if cells[:2] == ["gpu", "gpu=a10g"]:
            return line
    raise AssertionError(f"no a10g line in:\n{output}")


def test_the_hub_prices_a_profile_in_its_price_region(tmp_path: Path) -> None:
    base = f"c.GpuCostHub.profiles_from = {str(HUB_CONFIG)!r}\n"
    tokyo = _a10g_line(_check(tmp_path, base + "c.GpuCostHub.price_region = 'ap-northeast-1'\n"))
    price = CATALOG.find(provider="aws", market="on-demand", model="A10G", region="ap-northeast-1")
    assert price is not None
    assert price.region == "ap-northeast-1"
    assert f"${price.per_gpu_hour}/h" in tokyo
    assert "aws on-demand ap-northeast-1 (g5.xlarge), as of 2026-08-26" in tokyo
    assert "upper bound" not in tokyo
    # no region: the dearest region's price, labelled as the most it can cost
    unknown = _a10g_line(_check(tmp_path, base))
    assert "$1.71/h" in unknown
    assert "upper bound: aws on-demand sa-east-1 (g5.xlarge)" in unknown
    assert "region not known" in unknown


# -- the property: never below the machine's own region's row -------------------------------

AWS_REGIONS = sorted({r.region for r in ROWS if (r.provider, r.instance) == ("aws", "g5.xlarge")})
REGIONS = st.one_of(
    st.sampled_from(AWS_REGIONS),
    st.sampled_from(["af-south-1", "ap-southeast-7", "mx-central-1", ""]),
    st.text(max_size=20),
)


@given(region=REGIONS, spot=st.booleans())
def test_a_price_is_never_below_its_region_s_row_nor_a_missing_region_below_the_dearest(
    region: str, spot: bool
) -> None:
    market = "spot" if spot else "on-demand"
    price = PricePolicy(CATALOG, provider="aws", market=market, region=region).price_for(
        "NVIDIA A10G", 24 * 2**30
    )
    plan = plan_prices(
        AdminPrices(),
        provider="aws",
        instance_type="g5.xlarge",
        market=market,
        shared=False,
        providers=CATALOG.providers,
        rows=ROWS,
        region=region,
    )
    assert price is not None
    assert plan.whole is not None
    whole = plan.whole.per_gpu.per_gpu_hour
    own = find_instance(
        ROWS, provider="aws", instance="g5.xlarge", market="on-demand", region=region
    )
    assert own is not None
    rows = [
        r for r in ROWS if (r.provider, r.instance, r.market) == ("aws", "g5.xlarge", "on-demand")
    ]
    if region in AWS_REGIONS:
        assert own.region == region
        assert price.per_gpu_hour >= own.per_hour
        assert whole >= own.per_hour
        assert (price.upper_bound, plan.whole.per_gpu.upper_bound) == (spot, spot)
    else:
        dearest = max(r.per_hour for r in rows)
        assert price.per_gpu_hour >= dearest
        assert whole >= dearest
        assert price.upper_bound
        assert plan.whole.per_gpu.upper_bound
        assert price.reason
        assert plan.whole.per_gpu.reason
