"""A stop that tells the truth about AWS spot: the instance of a one-time Spot request
cannot be stopped (EC2 answers ``StopInstances`` with ``UnsupportedOperation``), so it is
never reported as stopped; the start says so; ``terminate-instance``, where the admin
chose it, ends it.

EC2 is moto's server behind :mod:`ec2_spot_standin`, which answers ``StopInstances`` for
a one-time Spot Instance as AWS documents (moto would stop it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from alert_receivers import Http
from cloud_standins import IMDS_TOKEN, Cloud, StandIn, serve, write_dmi
from ec2_spot_standin import ec2_spot_standin, refusing_ec2, spot_instance
from s3_server import free_port, start_moto
from test_budget_api import budget, wait_for

from jupyter_gpucost.cloud import aws
from jupyter_gpucost.cloud.detect import Endpoints
from jupyter_gpucost.cloud.stop import StopSettings, stop_instance
from jupyter_gpucost.core.machine import (
    CANNOT_STOP_ONE_TIME_SPOT,
    STILL_AWS_TERMINATED,
    Machine,
)
from jupyter_gpucost.server.budget.policy import BudgetError
from jupyter_gpucost.server.budget.stop_request import parse_stop_request


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    server = start_moto(port := free_port())
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def ec2(moto_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """The EC2 endpoint the instance's code talks to (``AWS_ENDPOINT_URL_EC2``)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    with ec2_spot_standin(moto_url) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", url)
        yield url


def state_of(moto_url: str, instance_id: str) -> str:
    client = boto3.client("ec2", endpoint_url=moto_url, region_name="us-east-1")
    found = client.describe_instances(InstanceIds=[instance_id])
    return str(found["Reservations"][0]["Instances"][0]["State"]["Name"])


def spot_machine(instance_id: str) -> Machine:
    return Machine("aws", "p5.48xlarge", "us-east-1", "spot", instance_id, source="dmi+metadata")


# -- the check at start ---------------------------------------------------------------


def test_a_one_time_spot_instance_is_known_not_to_stop(ec2: str, moto_url: str) -> None:
    instance_id = spot_instance(moto_url, "one-time")
    machine, note = aws.spot_stop_check(spot_machine(instance_id), {})
    assert machine.cannot_stop == CANNOT_STOP_ONE_TIME_SPOT
    assert not machine.stoppable
    assert machine.terminable
    assert machine.to_json()["cannot_stop"] == CANNOT_STOP_ONE_TIME_SPOT
    assert "is one-time" in note


def test_a_persistent_spot_instance_can_stop(ec2: str, moto_url: str) -> None:
    instance_id = spot_instance(moto_url, "persistent")
    machine, note = aws.spot_stop_check(spot_machine(instance_id), {})
    assert machine.stoppable
    assert machine.cannot_stop == ""
    assert "is persistent: it can stop" in note


def test_without_the_permission_the_check_says_which_and_changes_nothing(
    ec2: str, moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance_id = spot_instance(moto_url, "one-time")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    machine, note = aws.spot_stop_check(spot_machine(instance_id), {})
    assert machine.stoppable
    assert "ec2:DescribeSpotInstanceRequests" in note


def test_an_on_demand_instance_is_not_asked_about() -> None:
    machine = Machine("aws", "p5.48xlarge", "us-east-1", "on-demand", "i-0123456789abcdef0")
    # no endpoint, no credentials: it must not even try
    assert aws.spot_stop_check(machine, {}) == (machine, "")


# -- the stop and the termination ---------------------------------------------------------


def test_a_one_time_spot_instance_is_never_reported_stopped(ec2: str, moto_url: str) -> None:
    instance_id = spot_instance(moto_url, "one-time")
    result = stop_instance(spot_machine(instance_id), StopSettings(), Endpoints(), {})
    assert not result.ok
    assert f"EC2 cannot stop {instance_id} (UnsupportedOperation" in result.message
    assert "it bills until it is terminated" in result.message
    assert "terminate-instance" in result.message
    assert state_of(moto_url, instance_id) == "running"


def test_terminate_instance_ends_it_and_says_what_is_lost(ec2: str, moto_url: str) -> None:
    instance_id = spot_instance(moto_url, "one-time")
    other = spot_instance(moto_url, "one-time")
    result = stop_instance(
        spot_machine(instance_id), StopSettings(), Endpoints(), {}, terminate=True
    )
    assert result.ok, result.message
    assert result.message.startswith(f"EC2 is terminating {instance_id}")
    assert result.still_bills == STILL_AWS_TERMINATED
    assert state_of(moto_url, instance_id) in ("shutting-down", "terminated")
    assert state_of(moto_url, other) == "running"


def test_terminate_is_refused_where_it_cannot_end_the_machine() -> None:
    gcp = Machine("gcp", "a2-highgpu-1g", "us-central1", "spot", "123")
    result = stop_instance(gcp, StopSettings(), Endpoints(), {}, terminate=True)
    assert not result.ok
    assert "terminate-instance ends AWS and Lambda instances" in result.message
    shared = Machine("aws", "p5.48xlarge", "us-east-1", "spot", "i-1", shared=True)
    assert not stop_instance(shared, StopSettings(), Endpoints(), {}, terminate=True).ok


@pytest.mark.parametrize("when", ["now", "idle"])
def test_a_user_cannot_ask_for_a_termination(when: str) -> None:
    with pytest.raises(BudgetError, match="action"):
        parse_stop_request({"action": "terminate-instance", "reason": "user", "when": when})


# -- the whole server ---------------------------------------------------------------------


class _SpotServer:
    action = "stop-instance"

    @pytest.fixture
    def instance_id(self, ec2: str, moto_url: str) -> str:
        return spot_instance(moto_url, "one-time")

    @pytest.fixture
    def standin(self, instance_id: str) -> Iterator[StandIn]:
        cloud = Cloud(aws_life_cycle="spot")
        cloud.aws_identity["instanceId"] = instance_id
        yield from serve(cloud)

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch, refusing: str
    ) -> dict[str, object]:
        return {
            **self.spot_config(tmp_path, standin, monkeypatch),
            "aws_spot_prices_endpoint": refusing,
        }

    @pytest.fixture
    def refusing(self) -> Iterator[str]:
        """Where the spot price is asked: the role may not (the upper bound stays)."""
        with refusing_ec2() as (url, _):
            yield url

    def spot_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
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
            "budget_action": self.action,
            "budget_state_path": str(tmp_path / "budget.json"),
            "ledger_url": "none",
        }


class TestStopInstanceOnAOneTimeSpotInstance(_SpotServer):
    async def test_the_start_says_it_cannot_stop_and_the_budget_never_claims_it_did(
        self, jp_fetch: Any, moto_url: str, instance_id: str
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["machine"]["market"] == "spot"
        assert status["machine"]["cannot_stop"] == CANNOT_STOP_ONE_TIME_SPOT
        assert status["machine"]["stoppable"] is False
        # the ⚠ in the status bar and the panel's banner
        assert {"code": "machine-cannot-stop", "message": CANNOT_STOP_ONE_TIME_SPOT} in status[
            "warnings"
        ]

        async def acted() -> bool:
            return (await budget(jp_fetch))["state"] == "acted"

        await wait_for(acted, 60, "the budget's action")
        last = (await budget(jp_fetch))["last_action"]
        assert last["action"] == "stop-instance"
        assert last["instance"].startswith(f"failed: EC2 cannot stop {instance_id}")
        assert "server stopped instead" in last["message"]
        assert "still costs" in last["message"]
        assert state_of(moto_url, instance_id) == "running"
        assert IMDS_TOKEN not in json.dumps(last)


class TestTerminateInstanceWhereTheAdminChoseIt(_SpotServer):
    action = "terminate-instance"

    async def test_the_budget_terminates_it(
        self, jp_fetch: Any, moto_url: str, instance_id: str
    ) -> None:
        async def acted() -> bool:
            return (await budget(jp_fetch))["state"] == "acted"

        await wait_for(acted, 60, "the budget's action")
        last = (await budget(jp_fetch))["last_action"]
        assert last["action"] == "terminate-instance"
        assert last["result"] == "done"
        assert last["via"] == "aws"
        assert "machine terminating (EC2 is terminating" in last["message"]
        assert "instance-store data" in last["message"]
        assert "still costs" not in last["message"]
        assert state_of(moto_url, instance_id) in ("shutting-down", "terminated")


class TestTheBudgetWarningSaysTheMachineBillsUntilTerminated(_SpotServer):
    @pytest.fixture
    def gpucost_config(
        self,
        tmp_path: Path,
        standin: StandIn,
        monkeypatch: pytest.MonkeyPatch,
        http_receiver: Http,
        refusing: str,
    ) -> dict[str, object]:
        config = self.spot_config(tmp_path, standin, monkeypatch)
        return {
            **config,
            "aws_spot_prices_endpoint": refusing,
            "notify": [f"webhook://127.0.0.1:{http_receiver.port}/pi"],
            "notify_state_path": str(tmp_path / "alerts.json"),
        }

    async def test_the_threshold_alert_carries_the_sentence(
        self, jp_fetch: Any, http_receiver: Http
    ) -> None:
        def warnings() -> list[dict[str, Any]]:
            return [d for d in http_receiver.at("/pi") if d["kind"] == "budget_threshold"]

        async def warned() -> bool:
            return bool(warnings())

        await wait_for(warned, 60, "a budget threshold alert")
        for alert in warnings():
            assert alert["message"].endswith(
                "This machine cannot be stopped; it bills until terminated."
            ), alert["message"]


def test_a_warning_says_it_only_where_the_machine_cannot_stop() -> None:
    from jupyter_gpucost.alerts.model import Context, budget_crossing
    from jupyter_gpucost.core.budget_words import cannot_stop

    note = cannot_stop()
    alert = budget_crossing(Context(user="alice"), "s", 8_000_000, 10_000_000, note=note)
    assert alert is not None
    assert alert.message == (
        "alice has spent $8.00 of a $10.00 budget (80%). This machine cannot be stopped; "
        "it bills until terminated."
    )
    plain = budget_crossing(Context(user="alice"), "s", 8_000_000, 10_000_000)
    assert plain is not None
    assert "cannot be stopped" not in plain.message
