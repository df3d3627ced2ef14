"""``stop-instance``: the machine stopped through its cloud (moto's EC2 server, loopback
stand-ins of GCE, Azure and RunPod), and loud failures that fall back to the next action."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from cloud_standins import (
    AZURE_TOKEN,
    GCE_TOKEN,
    IMDS_TOKEN,
    RUNPOD_KEY,
    Cloud,
    StandIn,
    serve,
    write_dmi,
)
from s3_server import free_port, start_moto
from test_budget_api import budget, wait_for

from jupyter_gpucost.cloud.detect import Endpoints
from jupyter_gpucost.cloud.stop import StopResult, StopSettings, stop_instance
from jupyter_gpucost.core.machine import Machine
from jupyter_gpucost.server.budget.enforce import (
    BrowserSaves,
    Enforcer,
    EnforceSettings,
    InstanceStop,
)
from jupyter_gpucost.server.budget.events import BudgetEvents
from jupyter_gpucost.server.budget.policy import BudgetPolicy, Enforce
from jupyter_gpucost.server.budget.record import ActionRecord

LOG = logging.getLogger("test")
SECRETS = (IMDS_TOKEN, GCE_TOKEN, AZURE_TOKEN, RUNPOD_KEY)


@pytest.fixture(scope="module")
def ec2_endpoint() -> Iterator[str]:
    server = start_moto(port := free_port())
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def aws_env(ec2_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", ec2_endpoint)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    return ec2_endpoint


def running_instance(endpoint: str) -> str:
    ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name="us-east-1")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    made = ec2.run_instances(ImageId=image, InstanceType="p5.48xlarge", MinCount=1, MaxCount=1)
    return str(made["Instances"][0]["InstanceId"])


def state_of(endpoint: str, instance_id: str) -> str:
    ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name="us-east-1")
    found = ec2.describe_instances(InstanceIds=[instance_id])
    return str(found["Reservations"][0]["Instances"][0]["State"]["Name"])


def aws_machine(instance_id: str) -> Machine:
    return Machine(
        "aws", "p5.48xlarge", "us-east-1", "on-demand", instance_id, source="dmi+metadata"
    )


def no_secret(result: StopResult) -> None:
    for secret in SECRETS:
        assert secret not in result.message


# -- drivers ------------------------------------------------------------------------------


def test_aws_stop_instances_stops_this_instance_in_ec2(aws_env: str) -> None:
    instance_id = running_instance(aws_env)
    other = running_instance(aws_env)
    result = stop_instance(aws_machine(instance_id), StopSettings(), Endpoints(), {})
    assert result.ok, result.message
    assert result.via == "aws"
    assert result.message.startswith(f"EC2 is stopping {instance_id}")
    assert state_of(aws_env, instance_id) in ("stopping", "stopped")
    # only its own instance
    assert state_of(aws_env, other) == "running"


def test_aws_failure_names_the_permission_to_grant(
    aws_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = stop_instance(aws_machine("i-0123456789abcdef0"), StopSettings(), Endpoints(), {})
    assert not result.ok
    assert "no AWS credentials" in result.message
    assert "ec2:StopInstances" in result.message
    assert "instance/i-0123456789abcdef0" in result.message


def test_aws_unknown_instance_says_what_ec2_answered(aws_env: str) -> None:
    result = stop_instance(aws_machine("i-00000000000000000"), StopSettings(), Endpoints(), {})
    assert not result.ok
    assert "InvalidInstanceID" in result.message


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve(Cloud())


def gcp_machine() -> Machine:
    return Machine(
        "gcp",
        "a3-highgpu-1g",
        "us-central1",
        "spot",
        "4520031799277581759",
        source="dmi+metadata",
        zone="us-central1-a",
        project="my-project",
        name="train-1",
    )


def azure_machine() -> Machine:
    return Machine(
        "azure",
        "Standard_NC24ads_A100_v4",
        "eastus",
        "on-demand",
        "02aab8a4",
        source="dmi+metadata",
        name="gpu-vm",
        resource_group="ml-rg",
        subscription_id="8d10da13-8125-4ba9-a717-bf7490507b3d",
    )


def urls(standin: StandIn) -> tuple[StopSettings, Endpoints]:
    return (
        StopSettings(
            gcp_compute_url=standin.url,
            azure_management_url=standin.url,
            runpod_api_url=f"{standin.url}/v1",
            timeout_s=5,
        ),
        Endpoints(aws_imds=standin.url, gce_metadata_host=standin.host, azure_imds=standin.url),
    )


def test_gcp_instances_stop_with_the_metadata_token(standin: StandIn) -> None:
    result = stop_instance(gcp_machine(), *urls(standin), {})
    assert result.ok, result.message
    assert standin.cloud.stopped == ["projects/my-project/zones/us-central1-a/instances/train-1"]
    no_secret(result)


def test_gcp_refusal_names_compute_instances_stop(standin: StandIn) -> None:
    standin.cloud.allowed = False
    result = stop_instance(gcp_machine(), *urls(standin), {})
    assert not result.ok
    assert "403" in result.message
    assert "compute.instances.stop" in result.message
    assert standin.cloud.stopped == []
    no_secret(result)


def test_gcp_without_a_service_account_says_so(standin: StandIn) -> None:
    standin.cloud.identity = False
    result = stop_instance(gcp_machine(), *urls(standin), {})
    assert not result.ok
    assert "no service account token" in result.message


def test_azure_deallocates_with_the_managed_identity(standin: StandIn) -> None:
    result = stop_instance(azure_machine(), *urls(standin), {})
    assert result.ok, result.message
    assert standin.cloud.stopped == [
        "/subscriptions/8d10da13-8125-4ba9-a717-bf7490507b3d/resourceGroups/ml-rg/providers/"
        "Microsoft.Compute/virtualMachines/gpu-vm"
    ]
    no_secret(result)


def test_azure_refusal_and_missing_identity_name_what_to_grant(standin: StandIn) -> None:
    standin.cloud.allowed = False
    refused = stop_instance(azure_machine(), *urls(standin), {})
    assert not refused.ok
    assert "Microsoft.Compute/virtualMachines/deallocate/action" in refused.message
    standin.cloud.identity = False
    no_identity = stop_instance(azure_machine(), *urls(standin), {})
    assert "managed identity" in no_identity.message
    assert standin.cloud.stopped == []


def test_runpod_stops_the_pod_with_its_key(standin: StandIn) -> None:
    pod = Machine("runpod", instance_id="abc123xyz", source="environment")
    result = stop_instance(pod, *urls(standin), {"RUNPOD_API_KEY": RUNPOD_KEY})
    assert result.ok, result.message
    assert standin.cloud.stopped == ["abc123xyz"]
    refused = stop_instance(pod, *urls(standin), {"RUNPOD_API_KEY": "wrong"})
    assert not refused.ok
    assert "RUNPOD_API_KEY" in refused.message
    missing = stop_instance(pod, *urls(standin), {})
    assert "RUNPOD_API_KEY is not set" in missing.message


def test_the_admin_s_command_and_its_failure(tmp_path: Path) -> None:
    marker = tmp_path / "stopped"
    ok = stop_instance(None, StopSettings(command=("touch", str(marker))), Endpoints(), {})
    assert ok.ok
    assert marker.exists()
    failed = stop_instance(None, StopSettings(command=("false",)), Endpoints(), {})
    assert not failed.ok
    assert "exited with 1" in failed.message


def test_a_shared_node_or_an_unknown_machine_is_never_stopped(standin: StandIn) -> None:
    pod = Machine("aws", "p5.48xlarge", instance_id="i-0123456789abcdef0", shared=True)
    assert "Kubernetes" in stop_instance(pod, *urls(standin), {}).message
    assert "stop_instance_command" in stop_instance(None, *urls(standin), {}).message
    assert standin.cloud.requests == []


# -- the fallback ---------------------------------------------------------------------------


async def test_a_failed_stop_says_why_and_stops_the_server_instead() -> None:
    kept: list[ActionRecord] = []
    stopped: list[bool] = []

    async def keep(record: ActionRecord) -> None:
        kept.append(record)

    async def refuse() -> InstanceStop:
        return InstanceStop(False, "aws", "EC2 refused StopInstances (UnauthorizedOperation)")

    events = BudgetEvents(None, LOG, lambda: datetime.now(UTC))
    enforcer = Enforcer(
        EnforceSettings("stop-instance", 0.1, None, "$"),
        policy=BudgetPolicy(),
        saves=BrowserSaves(events, LOG),
        events=events,
        keep=keep,
        forget=lambda at: None,
        kernel_manager=None,
        stop_server=lambda: stopped.append(True),
        log=LOG,
        clock=lambda: datetime.now(UTC),
    )
    enforcer.stop_instance = refuse
    enforcer.machine_rate = lambda: Decimal("55.04")
    record = await enforcer.enforce(Enforce(None, "user"))
    assert record.instance == "failed: EC2 refused StopInstances (UnauthorizedOperation)"
    assert record.via == "self"
    assert "could not stop the machine (EC2 refused StopInstances" in record.message
    assert "server stopped instead" in record.message
    # the machine was not stopped: it still costs, and the message says so
    assert record.message.endswith("this machine still costs $55.04/h")
    assert record.still_usd_per_hour == Decimal("55.04")
    await asyncio.sleep(0.7)
    assert stopped == [True]
    action = [e for e in events.recent if e["kind"] == "action"][-1]
    assert action["still_usd_per_hour"] == 55.04


# -- the whole server: a spent budget stops the instance in EC2 -------------------------


class TestASpentBudgetStopsTheInstance:
    @pytest.fixture
    def instance_id(self, aws_env: str) -> str:
        return running_instance(aws_env)

    @pytest.fixture
    def standin(self, instance_id: str) -> Iterator[StandIn]:
        cloud = Cloud()
        cloud.aws_identity["instanceId"] = instance_id
        yield from serve(cloud)

    @pytest.fixture
    def gpucost_config(
        self,
        tmp_path: Path,
        standin: StandIn,
        aws_env: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> dict[str, object]:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", standin.url)
        return {
            "telemetry": "simulated",
            "simulated_trace": "h100-live",
            "sample_interval_s": 0.2,
            "minimum_charge_s": 0,
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "hard_budget_usd": 0.004,
            "budget_grace_s": 0,
            "budget_save_timeout_s": 1,
            "budget_action": "stop-instance",
            "budget_state_path": str(tmp_path / "budget.json"),
            "ledger_url": "none",
        }

    async def test_ec2_stops_it_and_the_record_says_so(
        self, jp_fetch: Any, aws_env: str, instance_id: str
    ) -> None:
        async def acted() -> bool:
            return (await budget(jp_fetch))["state"] == "acted"

        await wait_for(acted, 60, "the stop-instance action")
        assert state_of(aws_env, instance_id) in ("stopping", "stopped")
        last = (await budget(jp_fetch))["last_action"]
        assert last["action"] == "stop-instance"
        assert last["result"] == "done"
        assert last["via"] == "aws"
        assert last["instance"].startswith(f"EC2 is stopping {instance_id}")
        assert "machine stopping" in last["message"]
        assert "its disks still bill" in last["message"]
        assert "still costs" not in last["message"]
        assert IMDS_TOKEN not in json.dumps(last)
