"""The rate Vast.ai, RunPod and Lambda say they bill this very rental: read from their
APIs (stand-ins answering as the providers document), refused when implausible or
malformed (never $0), kept for the interval, read again, and shown as "billed rate from
Vast.ai, read HH:MM UTC" in the status; a new rate applies from then on."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import LAMBDA_KEY, RUNPOD_KEY, VAST_KEY, Cloud, StandIn, serve
from hypothesis import given, settings
from hypothesis import strategies as st
from test_budget_api import wait_for

from jupyter_gpucost.cloud.billed_rates import RateSettings, billed_rate
from jupyter_gpucost.cloud.lambda_cloud import parse_rate, read_rate
from jupyter_gpucost.cloud.outcome import StopSettings
from jupyter_gpucost.cloud.runpod_rate import RUNPOD_GRAPHQL, parse_runpod, read_runpod_rate
from jupyter_gpucost.cloud.spot_prices import QuoteCache
from jupyter_gpucost.cloud.vast_rate import parse_vast, read_vast_rate
from jupyter_gpucost.core.billed_rate import (
    FLOOR_FRACTION,
    BilledRate,
    RateRefused,
    catalog_range,
    check_plausible,
    rate_label,
)
from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.core.catalog import BASIS_BILLED, PricePolicy, load_catalog
from jupyter_gpucost.core.instance_prices import AdminPrices, PricePlan
from jupyter_gpucost.core.machine import Machine
from jupyter_gpucost.core.meter import Meter
from jupyter_gpucost.core.protocol import ENV_PRICES, decode_prices
from jupyter_gpucost.core.readings import GpuReading
from jupyter_gpucost.kernel.cell.prices import from_published
from jupyter_gpucost.kernel.link import ServerLink
from jupyter_gpucost.server.machine.spot_prices import (
    SpotPriceSettings,
    billed_rate_plan,
    rate_settings,
)

VAST_ID = "28493017"
POD = "8y5rumuc2qaq3c"
LAMBDA_ID = "0920582c7ff041399e34823a0be62549"
LOG = logging.getLogger("test")
NOW = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)
CATALOG = load_catalog()
LABEL = re.compile(r"^billed rate from (Vast\.ai|RunPod|Lambda), read \d\d:\d\d UTC$")


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve(Cloud())


def vast_settings(standin: StandIn, **more: Any) -> RateSettings:
    return RateSettings(
        vast_api_url=f"{standin.url}/api/v0",
        vast_api_key=VAST_KEY,
        runpod_graphql_url=f"{standin.url}/graphql",
        runpod_api_key=RUNPOD_KEY,
        lambda_api_url=f"{standin.url}/api/v1",
        lambda_api_key=LAMBDA_KEY,
        timeout_s=3,
        **more,
    )


def vast_answer(**row: object) -> str:
    base: dict[str, object] = {
        "id": int(VAST_ID),
        "gpu_name": "RTX 4090",
        "num_gpus": 1,
        "gpu_ram": 24564,
        "dph_total": 0.412,
    }
    return json.dumps({"instances": {**base, **row}})


# -- each provider's answer ------------------------------------------------------------


def test_vast_tells_its_dph_total_with_the_instances_own_key(standin: StandIn) -> None:
    rate = read_vast_rate(f"{standin.url}/api/v0", VAST_KEY, VAST_ID, 3)
    assert (rate.provider, rate.usd_per_hour, rate.gpu_model, rate.gpus) == (
        "vast",
        Decimal("0.412"),
        "RTX-4090",
        1,
    )
    method, path, headers = standin.cloud.requests[0]
    assert (method, path) == ("GET", f"/api/v0/instances/{VAST_ID}/?owner=me")
    assert headers["Authorization"] == f"Bearer {VAST_KEY}"
    check_plausible(rate, CATALOG)
    assert rate_label("vast", NOW, lambda m: m) == "billed rate from Vast.ai, read 14:02 UTC"


def test_runpod_tells_its_adjusted_cost_per_hour(standin: StandIn) -> None:
    standin.cloud.runpod_adjusted_cost_per_hr = 0.59
    rate = read_runpod_rate(f"{standin.url}/graphql", RUNPOD_KEY, POD, 3)
    assert (rate.usd_per_hour, rate.gpu_model, rate.gpus) == (Decimal("0.59"), "RTX-4090", 1)
    check_plausible(rate, CATALOG)
    # without adjustedCostPerHr, costPerHr
    standin.cloud.runpod_adjusted_cost_per_hr = None
    assert read_runpod_rate(f"{standin.url}/graphql", RUNPOD_KEY, POD, 3).usd_per_hour == (
        Decimal("0.69")
    )


def test_lambda_tells_its_types_price(standin: StandIn) -> None:
    rate = read_rate(f"{standin.url}/api/v1", LAMBDA_KEY, LAMBDA_ID, 3)
    assert (rate.usd_per_hour, rate.detail) == (Decimal("1.29"), "gpu_1x_a100_sxm4")


@pytest.mark.parametrize(
    ("cloud", "why"),
    [
        (Cloud(vast_instance="1"), "has no instance"),
        (Cloud(vast_dph_total=0), "never zero or less"),
        (Cloud(vast_dph_total="0.412"), "is not a number"),
        (Cloud(vast_gpu_name="Quantum Toaster"), "does not know the GPU"),
    ],
)
def test_a_vast_answer_that_cannot_be_used_says_why(cloud: Cloud, why: str) -> None:
    for standin in serve(cloud):
        with pytest.raises(RateRefused, match=why):
            read_vast_rate(f"{standin.url}/api/v0", VAST_KEY, VAST_ID, 3)
        with pytest.raises(RateRefused, match="401"):
            read_vast_rate(f"{standin.url}/api/v0", "not-the-key", VAST_ID, 3)


hostile = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=20),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(
    price=hostile,
    gpus=hostile,
    forged=st.booleans(),
    drop=st.sampled_from(["", "dph_total", "num_gpus", "gpu_name", "id"]),
)
def test_hostile_vast_answers_never_bill_zero_or_an_implausible_rate(
    price: object, gpus: object, forged: bool, drop: str
) -> None:
    row: dict[str, object] = {"dph_total": price, "num_gpus": gpus}
    if forged:
        row["id"] = 1
    doc = json.loads(vast_answer(**row))
    doc["instances"].pop(drop, None)
    try:
        rate = parse_vast(json.dumps(doc), VAST_ID, NOW)
        check_plausible(rate, CATALOG)
    except RateRefused:
        return
    assert not forged
    assert drop == ""
    cheapest, dearest = catalog_range(CATALOG, rate.gpu_model) or (Decimal(0), Decimal(0))
    assert rate.usd_per_hour > 0
    assert (
        rate.usd_per_hour
        >= cheapest * rate.gpus * Decimal(FLOOR_FRACTION.numerator) / FLOOR_FRACTION.denominator
    )
    assert rate.usd_per_hour <= dearest * rate.gpus * 4


@settings(max_examples=200, deadline=None)
@given(cost=hostile, adjusted=hostile, pod=st.sampled_from([POD, "someone-elses-pod", ""]))
def test_hostile_runpod_answers_are_refused_or_positive(
    cost: object, adjusted: object, pod: str
) -> None:
    answer = json.dumps(
        {
            "data": {
                "pod": {
                    "id": pod,
                    "costPerHr": cost,
                    "adjustedCostPerHr": adjusted,
                    "gpuCount": 1,
                    "machine": {"gpuDisplayName": "RTX 4090"},
                }
            }
        },
        allow_nan=True,
    )
    try:
        rate = parse_runpod(answer, POD, NOW)
    except RateRefused:
        return
    assert pod == POD
    assert rate.usd_per_hour > 0
    assert rate.usd_per_hour.is_finite()


@settings(max_examples=200, deadline=None)
@given(cents=hostile, forged=st.booleans())
def test_hostile_lambda_answers_are_refused_or_positive(cents: object, forged: bool) -> None:
    answer = json.dumps(
        {
            "data": {
                "id": "another" if forged else LAMBDA_ID,
                "instance_type": {"name": "gpu_1x_a100_sxm4", "price_cents_per_hour": cents},
            }
        },
        allow_nan=True,
    )
    try:
        rate = parse_rate(answer, LAMBDA_ID, NOW)
    except RateRefused:
        return
    assert not forged
    assert rate.usd_per_hour > 0
    assert rate.usd_per_hour.is_finite()


# -- the plan: refused rates keep the catalog's price, and say why ---------------------


def vast_machine() -> Machine:
    return Machine("vast", instance_id=VAST_ID, source="environment")


def test_a_rate_far_under_the_catalog_is_refused_and_logged(
    standin: StandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path))
    standin.cloud.vast_dph_total = 0.01
    plan = PricePlan("aws", "on-demand")
    with caplog.at_level(logging.WARNING):
        kept = billed_rate_plan(
            plan, vast_machine(), AdminPrices(), vast_settings(standin), CATALOG, LOG
        )
    assert kept == plan
    assert "billed rate refused" in caplog.text
    assert "under 1/4 of the cheapest catalog price" in caplog.text
    # a sound rate is taken, labelled billed; the admin's own price wins over it
    standin.cloud.vast_dph_total = 0.412
    billed = billed_rate_plan(
        plan, vast_machine(), AdminPrices(), vast_settings(standin, interval_s=0), CATALOG, LOG
    )
    assert billed.whole is not None
    assert (billed.whole.row.per_hour, billed.whole.per_gpu.basis) == (
        Decimal("0.412"),
        BASIS_BILLED,
    )
    admin = AdminPrices(provider="aws")
    assert (
        billed_rate_plan(plan, vast_machine(), admin, vast_settings(standin), CATALOG, LOG) == plan
    )


def test_a_reading_is_kept_for_the_interval(standin: StandIn, tmp_path: Path) -> None:
    cache = QuoteCache(tmp_path / "quotes.json", ttl_s=3600)
    first = billed_rate(vast_machine(), vast_settings(standin), cache)
    standin.cloud.vast_dph_total = 0.5
    # a restart inside the hour: the kept answer, nothing asked
    again = billed_rate(vast_machine(), vast_settings(standin), QuoteCache(cache.path, 3600))
    assert again.usd_per_hour == first.usd_per_hour == Decimal("0.412")
    assert len(standin.cloud.requests) == 1
    later = datetime.now(UTC) + timedelta(seconds=3601)
    assert billed_rate(vast_machine(), vast_settings(standin), cache, later).usd_per_hour == (
        Decimal("0.5")
    )


#: the admin set no keys: the instance's own are read from its environment at start
_SETTINGS = SpotPriceSettings(
    aws_spot_prices=True,
    aws_spot_prices_endpoint="",
    billed_rates=True,
    reread_interval_s=3600.0,
    vast_api_key="",
    runpod_graphql_url=RUNPOD_GRAPHQL,
    runpod_api_key="",
)


@settings(max_examples=100, deadline=None)
@given(
    changes=st.dictionaries(
        st.sampled_from(["CONTAINER_API_KEY", "RUNPOD_API_KEY", "LAMBDA_API_KEY", "CONTAINER_ID"]),
        st.text(max_size=30),
        max_size=4,
    )
)
def test_a_notebook_changing_the_environment_later_changes_nothing(
    changes: dict[str, str],
) -> None:
    environ = {"CONTAINER_API_KEY": VAST_KEY, "RUNPOD_API_KEY": RUNPOD_KEY}
    settings_at_start = rate_settings(_SETTINGS, StopSettings(), environ)
    environ.update(changes)
    for name in changes:
        if not changes[name]:
            del environ[name]
    assert settings_at_start.vast_api_key == VAST_KEY
    assert settings_at_start.runpod_api_key == RUNPOD_KEY
    assert rate_settings(_SETTINGS, StopSettings(), environ) is not settings_at_start


# -- the meter: a new rate applies from then on ------------------------------------------


def reading() -> GpuReading:
    return GpuReading(
        index=0,
        uuid="GPU-1",
        name="NVIDIA GeForce RTX 4090",
        utilization_pct=50.0,
        memory_used_bytes=0,
        memory_total_bytes=24 * 2**30,
        power_w=None,
        energy_j=None,
    )


@settings(max_examples=100, deadline=None)
@given(
    before_s=st.integers(min_value=1, max_value=7200),
    after_s=st.integers(min_value=1, max_value=7200),
    old=st.decimals(min_value="0.01", max_value="50", places=3),
    new=st.decimals(min_value="0.01", max_value="50", places=3),
)
def test_costs_already_metered_keep_their_rate(
    before_s: int, after_s: int, old: Decimal, new: Decimal
) -> None:
    def plan_of(usd: Decimal) -> PricePolicy:
        rate = BilledRate("vast", usd, NOW, "RTX-4090", 1, VAST_ID)
        from jupyter_gpucost.core.billed_rate import billed_plan

        whole = billed_plan(PricePlan("aws", "on-demand"), rate, "").whole
        assert whole is not None
        return PricePolicy(catalog=CATALOG, whole={"RTX-4090": whole.per_gpu})

    meter = Meter(
        policy=plan_of(old),
        rule=BillingRule(1, 0),
        sample_interval_s=before_s,
        start_us=0,
        started=NOW,
    )
    us = 1_000_000
    cost_before = meter.update([reading()], before_s * us, NOW).cost_micro
    meter.reprice(plan_of(new), Decimal(0))
    assert meter.snapshot().cost_micro == cost_before
    total = meter.update([reading()], (before_s + after_s) * us, NOW).cost_micro
    exact = (old * before_s + new * after_s) * us / 3600
    assert abs(total - exact) <= 2
    assert total >= cost_before


# -- the whole server on simulated GPUs ------------------------------------------------


def _server_config(tmp_path: Path, **more: object) -> dict[str, object]:
    return {
        "telemetry": "simulated",
        "simulated_trace": "h100-live",
        "sample_interval_s": 0.2,
        "minimum_charge_s": 0,
        "ledger_url": "none",
        "dmi_path": str(tmp_path / "no-dmi"),
        **more,
    }


async def machine_of(jp_fetch: Any) -> dict[str, Any]:
    status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
    machine: dict[str, Any] = status["machine"]
    return machine


async def kernel_cells_follow(stale_rate: Decimal, new_rate: Decimal) -> None:
    """A running kernel priced at ``stale_rate`` prices its next cells at ``new_rate``
    once it has asked its server (through its own link, as a kernel does)."""
    from jupyter_gpucost.kernel import link as kernel_link
    from jupyter_gpucost.kernel.cell import measure

    server = ServerLink.from_environment()
    assert server is not None
    answered = await asyncio.to_thread(server.prices)
    assert from_published(answered).rate_per_hour() == new_rate
    stale = replace(from_published(answered), base_per_hour=stale_rate, gpus={})
    assert stale.rate_per_hour() == stale_rate
    saved = (measure._prices, measure._prices_asked_at, kernel_link._link, kernel_link._checked)
    try:
        measure._prices, measure._prices_asked_at = stale, 0.0
        kernel_link._link, kernel_link._checked = server, True
        # the first cell after the interval still has the price it had; the next ones the new
        assert measure.prices().rate_per_hour() == stale_rate

        async def followed() -> bool:
            return measure.prices().rate_per_hour() == new_rate

        await wait_for(followed, 30, "the kernel's prices asked again")
    finally:
        measure._prices, measure._prices_asked_at, kernel_link._link, kernel_link._checked = saved


class TestVastInstanceBilledAtItsRate:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        yield from serve(Cloud(vast_dph_total=2.412, vast_gpu_name="H100 SXM"))

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        for name, value in {
            "CONTAINER_ID": VAST_ID,
            "VAST_CONTAINERLABEL": f"C.{VAST_ID}",
            "CONTAINER_API_KEY": VAST_KEY,
        }.items():
            monkeypatch.setenv(name, value)
        return _server_config(
            tmp_path, vast_api_url=f"{standin.url}/api/v0", price_reread_interval_s=1
        )

    async def test_the_status_shows_the_billed_rate_then_the_new_one(
        self, jp_fetch: Any, standin: StandIn
    ) -> None:
        machine = await machine_of(jp_fetch)
        assert machine["provider"] == "vast"
        assert machine["priced"] == "instance"
        assert machine["instance_price_usd_per_hour"] == 2.412
        assert machine["instance_price_basis"] == "billed"
        assert LABEL.match(machine["instance_price_label"]), machine["instance_price_label"]
        assert machine["instance_price_label"].startswith("billed rate from Vast.ai, read ")
        assert VAST_KEY not in json.dumps(machine)
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["gpus"][0]["price_basis"] == "billed"
        cost_before = status["cost_usd"]

        # the market moves: the next reading applies from then on
        standin.cloud.vast_dph_total = 3.1

        async def repriced() -> bool:
            return (await machine_of(jp_fetch))["instance_price_usd_per_hour"] == 3.1

        await wait_for(repriced, 30, "the hourly reading's new rate")
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["cost_usd"] >= cost_before
        # kernels started from now on inherit the new rate; a running one asks for it
        published = decode_prices(os.environ[ENV_PRICES])
        assert published is not None
        assert from_published(published).rate_per_hour() == Decimal("3.1")
        await kernel_cells_follow(stale_rate=Decimal("2.412"), new_rate=Decimal("3.1"))
        asked = [p for m, p, _ in standin.cloud.requests if m == "GET"]
        assert len(asked) >= 2

        # a reading the catalog finds implausible keeps the rate in force
        standin.cloud.vast_dph_total = 0.0001
        seen = len(standin.cloud.requests)

        async def asked_again() -> bool:
            return len(standin.cloud.requests) > seen + 1

        await wait_for(asked_again, 30, "two more readings")
        assert (await machine_of(jp_fetch))["instance_price_usd_per_hour"] == 3.1


class TestRunPodPodBilledAtItsRate:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        yield from serve(
            Cloud(runpod_gpu="H100 SXM", runpod_cost_per_hr=2.99, runpod_adjusted_cost_per_hr=2.69)
        )

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("RUNPOD_POD_ID", POD)
        monkeypatch.setenv("RUNPOD_API_KEY", RUNPOD_KEY)
        return _server_config(tmp_path, runpod_graphql_url=f"{standin.url}/graphql")

    async def test_the_status_shows_the_billed_rate(self, jp_fetch: Any) -> None:
        machine = await machine_of(jp_fetch)
        assert (machine["provider"], machine["priced"]) == ("runpod", "instance")
        assert machine["instance_price_usd_per_hour"] == 2.69
        assert machine["instance_price_label"].startswith("billed rate from RunPod, read ")
        assert RUNPOD_KEY not in json.dumps(machine)


class TestLambdaInstanceBilledAtItsRate:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        # the catalog's row of gpu_1x_a100_sxm4 says 1.29; Lambda bills this one 1.10
        yield from serve(Cloud(lambda_price_cents=110))

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("LAMBDA_API_KEY", LAMBDA_KEY)
        return _server_config(
            tmp_path,
            machine_provider="lambda",
            machine_instance_id=LAMBDA_ID,
            lambda_api_url=f"{standin.url}/api/v1",
        )

    async def test_the_status_shows_the_billed_rate(self, jp_fetch: Any, standin: StandIn) -> None:
        machine = await machine_of(jp_fetch)
        # the type and the rate come from one answer: Lambda was asked once
        asked = [p for m, p, _ in standin.cloud.requests if m == "GET"]
        assert asked == [f"/api/v1/instances/{LAMBDA_ID}"]
        assert (machine["instance_type"], machine["priced"]) == ("gpu_1x_a100_sxm4", "instance")
        assert machine["instance_price_usd_per_hour"] == 1.1
        assert machine["instance_price_label"].startswith("billed rate from Lambda, read ")
