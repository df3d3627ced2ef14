"""A real server on stand-in spot machines (AWS, GCP, Azure metadata shapes): GPUs with
no spot price are priced at the labelled upper bound, never $0, and a spent budget stops
the machine (moto's EC2 for AWS, the loopback stand-ins of GCE and Azure).

Every other way a session's cost could stay at 0 while GPUs are held — an unknown model,
an unknown provider, a price override for another model — prices the GPUs at an upper
bound too, and the spent budget acts. A catalog that fails to load stops the server at
start-up, naming the setting (tests/test_config.py): it never meters at $0.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import test_stop_instance
from cloud_standins import Cloud, StandIn, serve, write_dmi
from ec2_spot_standin import refusing_ec2
from test_budget_api import budget, wait_for
from test_stop_instance import state_of

from jupyter_gpucost.core.instance_prices import find_instance, load_instance_rows

# moto's EC2 on loopback (one per module) and the AWS SDK's variables pointed at it
ec2_endpoint = test_stop_instance.ec2_endpoint
aws_env = test_stop_instance.aws_env

#: a hard budget spent within a second or two at any GPU's price
BUDGET_USD = 0.0005
#: the upper bound of a spot machine, as the status says it
SPOT = "spot: priced at on-demand, the most it can cost"


def write_trace(folder: Path, name: str, memory_gib: int, gpus: int = 1) -> str:
    """A replayed trace of ``gpus`` busy GPUs named as NVML names them on that machine."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "trace.jsonl"
    devices = [
        {
            "index": i,
            "uuid": f"GPU-{i:08d}-0000-0000-0000-000000000000",
            "name": name,
            "memory_total_bytes": memory_gib * 2**30,
        }
        for i in range(gpus)
    ]
    header = {
        "format": "jupyter-gpucost-trace",
        "version": 1,
        "name": f"{name} stand-in",
        "interval_s": 1.0,
        "synthetic": True,
        "devices": devices,
    }
    gpu = {"utilization_pct": 90.0, "memory_used_bytes": 2**30, "power_w": 150.0}
    frames = [json.dumps({"t": float(t), "gpus": [gpu] * gpus}) for t in range(5)]
    path.write_text("\n".join([json.dumps(header), *frames]) + "\n")
    return str(path)


def budget_config(tmp_path: Path, trace: str) -> dict[str, object]:
    """A session whose hard budget is spent within seconds at any GPU's price."""
    return {
        "telemetry": "simulated",
        "simulated_trace": trace,
        "sample_interval_s": 0.2,
        "minimum_charge_s": 0,
        "hard_budget_usd": BUDGET_USD,
        "budget_grace_s": 0,
        "budget_save_timeout_s": 1,
        "budget_state_path": str(tmp_path / "budget.json"),
        "ledger_url": "none",
    }


async def status(jp_fetch: Any) -> dict[str, Any]:
    return dict(json.loads((await jp_fetch("gpucost", "api", "status")).body))


async def acted(jp_fetch: Any) -> dict[str, Any]:
    """The budget's last action, once the spent budget has acted."""

    async def done() -> bool:
        return (await budget(jp_fetch))["state"] == "acted"

    await wait_for(done, 60, "the budget's action")
    return dict((await budget(jp_fetch))["last_action"])


def assert_upper_bound(doc: dict[str, Any], price: float, reason: str) -> None:
    """What a user sees: the GPUs at the bound, labelled, and a cost that rises."""
    assert doc["price_basis"] == "upper-bound"
    assert reason in doc["price_basis_reasons"]
    for gpu in doc["gpus"]:
        assert gpu["price_usd_per_hour"] == price
        assert gpu["price_basis"] == "upper-bound"
        assert gpu["price_basis_reason"] == reason
    assert doc["rate_usd_per_hour"] >= price * len(doc["gpus"]) > 0
    assert "price-upper-bound" in [w["code"] for w in doc["warnings"]]
    assert "unpriced-gpu" not in [w["code"] for w in doc["warnings"]]


# -- AWS: a g5.xlarge spot instance, stopped in moto's EC2 ------------------------------


class TestAnAwsSpotInstance:
    @pytest.fixture
    def instance_id(self, aws_env: str) -> str:
        ec2 = boto3.client("ec2", endpoint_url=aws_env, region_name="us-east-1")
        image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        made = ec2.run_instances(
            ImageId=image,
            InstanceType="g5.xlarge",
            MinCount=1,
            MaxCount=1,
            InstanceMarketOptions={"MarketType": "spot"},
        )
        return str(made["Instances"][0]["InstanceId"])

    @pytest.fixture
    def standin(self, instance_id: str) -> Iterator[StandIn]:
        cloud = Cloud(aws_life_cycle="spot")
        cloud.aws_identity["instanceId"] = instance_id
        cloud.aws_identity["instanceType"] = "g5.xlarge"
        yield from serve(cloud)

    @pytest.fixture
    def refusing(self) -> Iterator[str]:
        """Where the spot price is asked: the instance's role may not (UnauthorizedOperation)."""
        with refusing_ec2() as (url, _):
            yield url

    @pytest.fixture
    def gpucost_config(
        self,
        tmp_path: Path,
        standin: StandIn,
        aws_env: str,
        monkeypatch: pytest.MonkeyPatch,
        refusing: str,
    ) -> dict[str, object]:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", standin.url)
        dmi = write_dmi(tmp_path / "dmi", "aws")
        (Path(dmi) / "product_name").write_text("g5.xlarge\n")
        return {
            **budget_config(tmp_path, write_trace(tmp_path / "trace", "NVIDIA A10G", 24)),
            "dmi_path": dmi,
            "budget_action": "stop-instance",
            "aws_spot_prices_endpoint": refusing,
        }

    async def test_priced_at_on_demand_labelled_and_the_spent_budget_stops_it(
        self, jp_fetch: Any, aws_env: str, instance_id: str
    ) -> None:
        doc = await status(jp_fetch)
        assert (doc["machine"]["instance_type"], doc["machine"]["market"]) == (
            "g5.xlarge",
            "spot",
        )
        # the g5.xlarge's on-demand price (whole instance): the most a spot one costs
        row = find_instance(
            load_instance_rows(),
            provider="aws",
            instance="g5.xlarge",
            market="on-demand",
            region="us-east-1",
        )
        assert row is not None
        assert_upper_bound(doc, float(row.per_hour), SPOT)
        assert doc["machine"]["instance_price_basis"] == "upper-bound"
        assert doc["machine"]["price_note"] == (
            "no whole-instance price for g5.xlarge spot: priced at on-demand, the most it can cost"
        )
        last = await acted(jp_fetch)
        assert last["action"] == "stop-instance"
        assert last["via"] == "aws"
        assert state_of(aws_env, instance_id) in ("stopping", "stopped")
        assert (await status(jp_fetch))["cost_usd"] > 0


# -- GCP and Azure metadata shapes: spot VMs with no spot row ----------------------------


class TestAGcpSpotVm:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        cloud = Cloud()
        cloud.gce_instance["machineType"] = "projects/123456789012/machineTypes/g2-standard-4"
        yield from serve(cloud)

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("GCE_METADATA_HOST", standin.host)
        return {
            **budget_config(tmp_path, write_trace(tmp_path / "trace", "NVIDIA L4", 23)),
            "dmi_path": write_dmi(tmp_path / "dmi", "gcp"),
            "budget_action": "stop-instance",
            "gcp_compute_url": standin.url,
        }

    async def test_priced_at_its_regions_spot_row_and_the_spent_budget_stops_it(
        self, jp_fetch: Any, standin: StandIn
    ) -> None:
        doc = await status(jp_fetch)
        assert (doc["machine"]["provider"], doc["machine"]["market"]) == ("gcp", "spot")
        # the catalog has g2-standard-4's spot price in us-central1 (pricing.yml's
        # hour_spot, 0.397336): no bound, and not the on-demand 0.70683
        assert doc["gpus"][0]["price_basis"] == "catalog"
        assert doc["gpus"][0]["price_usd_per_hour"] == 0.397336
        assert "us-central1" in doc["gpus"][0]["price_source"]
        last = await acted(jp_fetch)
        assert (last["action"], last["via"]) == ("stop-instance", "gcp")
        assert standin.cloud.stopped == [
            "projects/my-project/zones/us-central1-a/instances/train-1"
        ]


class TestAnAzureSpotVm:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        cloud = Cloud()
        cloud.azure_compute["priority"] = "Spot"
        yield from serve(cloud)

    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, standin: StandIn) -> dict[str, object]:
        trace = write_trace(tmp_path / "trace", "NVIDIA A100 80GB PCIe", 80)
        return {
            **budget_config(tmp_path, trace),
            "dmi_path": write_dmi(tmp_path / "dmi", "azure"),
            "azure_imds_url": standin.url,
            "azure_management_url": standin.url,
            "budget_action": "stop-instance",
        }

    async def test_priced_at_on_demand_labelled_and_the_spent_budget_stops_it(
        self, jp_fetch: Any, standin: StandIn
    ) -> None:
        doc = await status(jp_fetch)
        assert (doc["machine"]["provider"], doc["machine"]["market"]) == ("azure", "spot")
        assert_upper_bound(doc, doc["gpus"][0]["price_usd_per_hour"], SPOT)
        last = await acted(jp_fetch)
        assert (last["action"], last["via"]) == ("stop-instance", "azure")
        assert [p.rsplit("/", 1)[-1] for p in standin.cloud.stopped] == ["gpu-vm"]


# -- every other way a cost could stay at 0 while GPUs are held --------------------------


@pytest.fixture
def no_machine_config(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, object]:
    name, memory_gib, extra, _reason = request.param
    return {
        **budget_config(tmp_path, write_trace(tmp_path / "trace", name, memory_gib, gpus=2)),
        "detect_machine": False,
        "budget_action": "shutdown",
        **extra,
    }


CASES = {
    # an NVML name no catalog model matches: the dearest GPU of the catalog
    "unknown-model": (
        "NVIDIA RTX PRO 6000 Blackwell",
        96,
        {},
        "no price for NVIDIA RTX PRO 6000 Blackwell: priced at the dearest GPU of the catalog",
    ),
    # a model with no price at the provider: the dearest known price of that model
    "unpriced-model": (
        "NVIDIA A10G",
        24,
        {"price_provider": "gcp"},
        "no gcp on-demand price for A10G: priced at the dearest known, $",
    ),
    # the admin's spot market with no spot row: on-demand
    "spot-market": (
        "NVIDIA L4",
        23,
        {"price_market": "spot", "price_region": "us-east-1"},
        SPOT,
    ),
    # an override for another model prices nothing here
    "override-for-another-model": (
        "NVIDIA A10G",
        24,
        {"price_provider": "azure", "price_overrides": {"H100-80GB": 2.5}},
        "no azure on-demand price for A10G: priced at the dearest known, $",
    ),
    # the admin's own figure for a GPU no price fits
    "admin-default": (
        "Mystery Accelerator 9000",
        32,
        {"unknown_gpu_usd_per_hour": 7.25},
        "no price for Mystery Accelerator 9000: priced at c.GpuCost.unknown_gpu_usd_per_hour, "
        "$7.25/h",
    ),
}


@pytest.mark.parametrize("no_machine_config", list(CASES.values()), ids=list(CASES), indirect=True)
class TestEveryPathCountsAndTrips:
    @pytest.fixture
    def gpucost_config(self, no_machine_config: dict[str, object]) -> dict[str, object]:
        return no_machine_config

    async def test_the_cost_rises_and_the_spent_budget_acts(
        self, jp_fetch: Any, no_machine_config: dict[str, object], request: pytest.FixtureRequest
    ) -> None:
        reason = CASES[request.node.callspec.id][3]
        doc = await status(jp_fetch)
        assert doc["price_basis"] == "upper-bound"
        assert all(g["price_usd_per_hour"] > 0 for g in doc["gpus"])
        assert len(doc["price_basis_reasons"]) == 1
        assert doc["price_basis_reasons"][0].startswith(reason)
        # the budget acts only once the cost has risen to it
        last = await acted(jp_fetch)
        assert last["action"] == "shutdown"
        assert (await status(jp_fetch))["cost_usd"] >= BUDGET_USD


class TestAnUnknownProvider:
    """A Vast.ai container: a provider the catalog does not have (priced at aws), and an
    RTX 3090, which the catalog prices only in yuan: the dearest dollar GPU, labelled."""

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, no_dmi: str, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("VAST_CONTAINERLABEL", "C.12345")
        trace = write_trace(tmp_path / "trace", "NVIDIA GeForce RTX 3090", 24)
        return {**budget_config(tmp_path, trace), "dmi_path": no_dmi, "budget_action": "shutdown"}

    async def test_the_cost_rises_and_the_spent_budget_acts(self, jp_fetch: Any) -> None:
        doc = await status(jp_fetch)
        assert doc["machine"]["provider"] == "vast"
        assert doc["prices"]["provider"] == "aws"
        assert doc["currency"] == "USD"
        reason = doc["price_basis_reasons"][0]
        assert reason.startswith("no price for RTX-3090: priced at the dearest GPU of the catalog")
        assert_upper_bound(doc, doc["gpus"][0]["price_usd_per_hour"], reason)
        assert (await acted(jp_fetch))["action"] == "shutdown"
