"""AWS spot prices, on by default: DescribeSpotPriceHistory through moto's EC2 on loopback
(moto answers every type with SpotPrice "0.00001", in force since 2006-01-02), cached and
dated; a machine priced at it instead of its on-demand upper bound; a refusal
(UnauthorizedOperation) or any failure keeps the bound."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, StandIn, serve, write_dmi
from ec2_spot_standin import refusing_ec2

from jupyter_gpucost.cloud.spot_prices import (
    QuoteCache,
    SpotPriceError,
    SpotQuote,
    ask_aws,
    aws_quote,
    newest,
)

pytestmark = pytest.mark.usefixtures("jp_serverapp")

#: the shape of EC2's answer, as boto3 gives it (documented example values)
HISTORY = [
    {
        "AvailabilityZone": "us-east-1a",
        "InstanceType": "p5.48xlarge",
        "ProductDescription": "Linux/UNIX",
        "SpotPrice": "22.511400",
        "Timestamp": datetime(2026, 11, 27, 9, 0, tzinfo=UTC),
    },
    {
        "AvailabilityZone": "us-east-1a",
        "InstanceType": "p5.48xlarge",
        "ProductDescription": "Linux/UNIX",
        "SpotPrice": "21.900000",
        "Timestamp": datetime(2026, 11, 27, 13, 0, tzinfo=UTC),
    },
    {
        "AvailabilityZone": "us-east-1b",
        "InstanceType": "p5.48xlarge",
        "ProductDescription": "Linux/UNIX",
        "SpotPrice": "1.000000",
        "Timestamp": datetime(2026, 11, 27, 14, 0, tzinfo=UTC),
    },
]


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    # boto3 finds credentials in the environment, never through a metadata service
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for s in serve(Cloud(aws_life_cycle="spot")):
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.url)
        yield s


@pytest.fixture
def gpucost_config(standin: StandIn, tmp_path: Path, s3_endpoint: str) -> dict[str, object]:
    return {
        "telemetry": "simulated",
        "sample_interval_s": 0.2,
        "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
        "budget_state_path": str(tmp_path / "budget.json"),
        "aws_spot_prices": True,
        "aws_spot_prices_endpoint": s3_endpoint,
    }


async def machine(jp_fetch: Any) -> dict[str, Any]:
    status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
    return dict(status["machine"])


async def test_a_spot_instance_is_priced_at_aws_spot_price(jp_fetch: Any) -> None:
    m = await machine(jp_fetch)
    assert m["market"] == "spot"
    assert m["instance_price_basis"] == "catalog"
    assert m["instance_price_usd_per_hour"] == 0.00001
    source = m["instance_price_source"]
    assert "AWS spot price for p5.48xlarge in us-east-1a (Linux/UNIX)" in source
    assert "in force since 2006-01-02T15:04:05" in source
    assert m["price_note"] is None


class TestOnByDefault:
    """Nothing set but the endpoint botocore reads from the environment (moto's)."""

    @pytest.fixture
    def gpucost_config(
        self, standin: StandIn, tmp_path: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", s3_endpoint)
        return {
            "telemetry": "simulated",
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "budget_state_path": str(tmp_path / "budget.json"),
        }

    async def test_the_spot_price_is_used(self, jp_fetch: Any) -> None:
        m = await machine(jp_fetch)
        assert m["instance_price_basis"] == "catalog"
        assert m["instance_price_usd_per_hour"] == 0.00001
        assert "AWS spot price for p5.48xlarge in us-east-1a" in m["instance_price_source"]


class TestTurnedOff:
    @pytest.fixture
    def gpucost_config(self, standin: StandIn, tmp_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "budget_state_path": str(tmp_path / "budget.json"),
            "aws_spot_prices": False,
        }

    async def test_the_upper_bound_stays(self, jp_fetch: Any) -> None:
        m = await machine(jp_fetch)
        assert m["instance_price_basis"] == "upper-bound"
        assert m["instance_price_usd_per_hour"] == 55.04


class TestTheRoleMayNotAsk:
    """AWS answers UnauthorizedOperation: the labelled bound stays, one line in the log."""

    @pytest.fixture
    def refusing(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
        with refusing_ec2() as (url, asked):
            monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", url)
            yield asked

    @pytest.fixture
    def gpucost_config(
        self, standin: StandIn, tmp_path: Path, refusing: list[str]
    ) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "budget_state_path": str(tmp_path / "budget.json"),
        }

    async def test_the_upper_bound_stays(self, jp_fetch: Any, refusing: list[str]) -> None:
        m = await machine(jp_fetch)
        assert m["instance_price_basis"] == "upper-bound"
        assert m["instance_price_usd_per_hour"] == 55.04
        assert refusing == ["DescribeSpotPriceHistory"]


class TestAwsUnreachable:
    @pytest.fixture
    def gpucost_config(self, standin: StandIn, tmp_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "budget_state_path": str(tmp_path / "budget.json"),
            "aws_spot_prices": True,
            "aws_spot_prices_endpoint": "http://127.0.0.1:9",
        }

    async def test_the_upper_bound_stays(self, jp_fetch: Any) -> None:
        m = await machine(jp_fetch)
        assert m["instance_price_basis"] == "upper-bound"
        assert m["instance_price_usd_per_hour"] == 55.04


def test_a_refusal_says_what_to_grant(monkeypatch: pytest.MonkeyPatch) -> None:
    """EC2's answer to a role without the permission (UnauthorizedOperation, 403)."""
    import boto3
    from botocore.exceptions import ClientError

    class Refusing:
        def describe_spot_price_history(self, **kwargs: object) -> object:
            error = {
                "Error": {
                    "Code": "UnauthorizedOperation",
                    "Message": "You are not authorized to perform this operation.",
                }
            }
            raise ClientError(error, "DescribeSpotPriceHistory")  # type: ignore[arg-type]

    monkeypatch.setattr(boto3, "client", lambda *args, **kwargs: Refusing())
    with pytest.raises(
        SpotPriceError, match="grant the instance's role ec2:DescribeSpotPriceHistory"
    ):
        ask_aws("p5.48xlarge", "us-east-1a", "us-east-1")


def test_any_failure_keeps_the_bound_and_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from jupyter_gpucost.core.catalog import load_catalog
    from jupyter_gpucost.core.instance_prices import load_instance_rows
    from jupyter_gpucost.core.machine import Machine
    from jupyter_gpucost.server.machine.setup import AdminPrices, price_plan
    from jupyter_gpucost.server.machine.spot_prices import SpotPriceSettings, spot_price_plan

    settings = SpotPriceSettings(
        aws_spot_prices=True,
        aws_spot_prices_endpoint="",
        billed_rates=True,
        reread_interval_s=3600.0,
        vast_api_key="",
        runpod_graphql_url="",
        runpod_api_key="",
    )

    def refused(*args: object, **kwargs: object) -> object:
        raise SpotPriceError("AWS refused DescribeSpotPriceHistory (UnauthorizedOperation)")

    monkeypatch.setattr("jupyter_gpucost.server.machine.spot_prices.aws_quote", refused)
    m = Machine("aws", "p5.48xlarge", "us-east-1", "spot", "i-0123", zone="us-east-1a")
    plan = price_plan(AdminPrices(), m, load_catalog(None), load_instance_rows(None))
    assert plan.whole is not None
    assert plan.whole.per_gpu.basis == "upper-bound"
    log = logging.getLogger("test-spot-price")
    with caplog.at_level(logging.WARNING, logger="test-spot-price"):
        assert spot_price_plan(plan, m, settings, log) == plan
    assert "UnauthorizedOperation" in caplog.text
    assert "upper bound kept" in caplog.text


def test_the_newest_price_of_the_zone() -> None:
    quote = newest(HISTORY, "p5.48xlarge", "us-east-1a")
    assert quote.usd_per_hour == Decimal("21.900000")
    assert quote.since == datetime(2026, 11, 27, 13, 0, tzinfo=UTC)
    with pytest.raises(SpotPriceError, match="no usable spot price"):
        newest(HISTORY, "p4d.24xlarge", "us-east-1a")


@pytest.mark.parametrize("price", ["0", "0.000000", "-1", "NaN", "Infinity", "", "free"])
def test_never_a_price_of_nothing(price: str) -> None:
    item = {**HISTORY[0], "SpotPrice": price}
    with pytest.raises(SpotPriceError):
        newest([item], "p5.48xlarge", "us-east-1a")


def test_cached_for_an_hour_then_asked_again(tmp_path: Path, s3_endpoint: str) -> None:
    cache = QuoteCache(tmp_path / "spot.json")
    first = aws_quote("p5.48xlarge", "us-east-1a", "us-east-1", cache, endpoint_url=s3_endpoint)
    assert first.usd_per_hour == Decimal("0.00001")
    # kept: a second ask needs no answer from AWS
    again = aws_quote(
        "p5.48xlarge", "us-east-1a", "us-east-1", cache, endpoint_url="http://127.0.0.1:9"
    )
    assert again == first
    # an hour later it is asked again (and here gets no answer)
    stale = SpotQuote(
        first.instance_type,
        first.zone,
        first.usd_per_hour,
        first.since,
        datetime.now(UTC) - timedelta(seconds=3601),
    )
    cache.put(stale)
    with pytest.raises(SpotPriceError, match="got no answer"):
        aws_quote(
            "p5.48xlarge",
            "us-east-1a",
            "us-east-1",
            cache,
            endpoint_url="http://127.0.0.1:9",
            timeout_s=1,
        )
