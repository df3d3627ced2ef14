"""Alibaba Cloud ECS: detected from DMI and its metadata service, priced whole from its
instance type, stopped with ``StopInstance`` signed with the instance's RAM role; each
failure (no role, no permission, a key the API does not know, the API down) says why and
what to grant, and a machine that is not ECS sends nothing to 100.100.100.200."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud_server import closed_url, connections, in_language, stop_instance_config, write_catalog
from cloud_standins import (
    ALIBABA_KEY_ID,
    ALIBABA_KEY_SECRET,
    ALIBABA_METADATA_TOKEN,
    ALIBABA_STS_TOKEN,
    Cloud,
    StandIn,
    serve,
    write_dmi,
)
from test_budget_api import budget, wait_for

from jupyter_gpucost.cloud import alibaba
from jupyter_gpucost.cloud.detect import DetectSettings, Endpoints, identify
from jupyter_gpucost.cloud.stop import StopResult, StopSettings, stop_instance
from jupyter_gpucost.core.machine import (
    STILL_ALIBABA_KEEP_CHARGING,
    STILL_ALIBABA_STOP_CHARGING,
    Machine,
    cloud_from_dmi,
)

SECRETS = (ALIBABA_KEY_ID, ALIBABA_KEY_SECRET, ALIBABA_STS_TOKEN, ALIBABA_METADATA_TOKEN)
INSTANCE = "i-bp1iw9u3m0adiz4ag1x2"


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve(Cloud(metadata="alibaba"))


def machine() -> Machine:
    return Machine(
        "alibaba",
        "ecs.gn7i-c8g1.2xlarge",
        "cn-hangzhou",
        "",
        INSTANCE,
        source="dmi+metadata",
        zone="cn-hangzhou-i",
    )


def stop(standin: StandIn, **settings: Any) -> StopResult:
    result = stop_instance(
        machine(),
        StopSettings(alibaba_ecs_api_url=standin.url, timeout_s=5, **settings),
        Endpoints(alibaba_metadata=standin.url),
        {},
    )
    for secret in SECRETS:
        assert secret not in result.message
    return result


def test_the_signature_is_the_documented_example_s() -> None:
    # help.aliyun.com, "Signature mechanism" of RPC APIs: DescribeRegions signed with the
    # AccessKey secret "testsecret"
    params = {
        "Timestamp": "2016-02-23T12:46:24Z",
        "Format": "XML",
        "AccessKeyId": "testid",
        "Action": "DescribeRegions",
        "SignatureMethod": "HMAC-SHA1",
        "SignatureNonce": "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf",
        "Version": "2014-05-26",
        "SignatureVersion": "1.0",
    }
    assert alibaba.signature(params, "testsecret", "GET") == "OLeaidS1JvxuMvnyHOwuJ+uX5qY="
    assert alibaba.percent("a b*~/é") == "a%20b%2A~%2F%C3%A9"


# -- detection ------------------------------------------------------------------------------


def test_dmi_names_alibaba_cloud_as_ds_identify_does() -> None:
    assert cloud_from_dmi({"sys_vendor": "Alibaba Cloud", "product_name": "Alibaba Cloud ECS"})
    assert cloud_from_dmi({"product_name": "Alibaba Cloud ECS"}) == "alibaba"
    assert cloud_from_dmi({"sys_vendor": "Alibaba Cloud", "product_name": "ECS"}) is None


def test_an_ecs_instance_is_read_from_its_identity_document(
    tmp_path: Path, standin: StandIn
) -> None:
    dmi = write_dmi(tmp_path / "dmi", "alibaba")
    found = identify(
        DetectSettings(dmi_path=dmi, endpoints=Endpoints(alibaba_metadata=standin.url)), {}
    )
    assert found == Machine(
        "alibaba",
        "ecs.gn7i-c8g1.2xlarge",
        "cn-hangzhou",
        "",
        INSTANCE,
        source="dmi+metadata",
        zone="cn-hangzhou-i",
    )
    # the hardened mode: a token first, then the document with it
    methods = [(m, p) for m, p, _ in standin.cloud.requests]
    assert methods == [
        ("PUT", "/latest/api/token"),
        ("GET", "/latest/dynamic/instance-identity/document"),
    ]
    sent = {k.lower(): v for k, v in standin.cloud.requests[1][2].items()}
    assert sent["x-aliyun-ecs-metadata-token"] == ALIBABA_METADATA_TOKEN


def test_a_service_without_tokens_is_read_in_normal_mode(tmp_path: Path, standin: StandIn) -> None:
    standin.cloud.raw["/latest/api/token"] = b""  # a service that hands out no token
    standin.cloud.alibaba_hardened = False
    found = identify(
        DetectSettings(
            dmi_path=write_dmi(tmp_path / "dmi", "alibaba"),
            endpoints=Endpoints(alibaba_metadata=standin.url),
        ),
        {},
    )
    assert found is not None
    assert found.instance_type == "ecs.gn7i-c8g1.2xlarge"


def test_a_silent_metadata_service_leaves_what_dmi_says(tmp_path: Path) -> None:
    closed = closed_url()
    found = identify(
        DetectSettings(
            dmi_path=write_dmi(tmp_path / "dmi", "alibaba"),
            endpoints=Endpoints(alibaba_metadata=closed),
            timeout_s=1.0,
        ),
        {},
    )
    assert found is not None
    assert (found.provider, found.source, found.instance_type) == ("alibaba", "dmi", "")
    assert "got no answer" in found.note


def test_a_machine_that_is_not_ecs_sends_no_packet_to_its_metadata_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = connections(monkeypatch)
    for provider in ("aws", "gcp", "azure"):
        # the default endpoints: a connection to 100.100.100.200 would be recorded
        dmi = write_dmi(tmp_path / provider, provider)
        identify(DetectSettings(dmi_path=dmi, timeout_s=0.2), {})
    identify(DetectSettings(dmi_path=str(tmp_path / "none")), {"VAST_CONTAINERLABEL": "C.1"})
    assert not [a for a in seen if isinstance(a, tuple) and a[0] == "100.100.100.200"]


# -- StopInstance ------------------------------------------------------------------------------


def test_stop_instance_is_signed_with_the_role_s_credentials(standin: StandIn) -> None:
    result = stop(standin)
    assert result.ok, result.message
    assert result.via == "alibaba"
    assert result.message == f"Alibaba Cloud is stopping {INSTANCE} (StopCharging)"
    assert result.still_bills == STILL_ALIBABA_STOP_CHARGING
    assert standin.cloud.stopped == [f"{INSTANCE}:StopCharging"]
    call = standin.cloud.ecs_calls[0]
    assert {k: call[k] for k in ("Action", "Version", "InstanceId", "SignatureMethod")} == {
        "Action": "StopInstance",
        "Version": "2014-05-26",
        "InstanceId": INSTANCE,
        "SignatureMethod": "HMAC-SHA1",
    }
    # the region's endpoint ({region} in the setting)
    stop_instance(
        machine(),
        StopSettings(alibaba_ecs_api_url=standin.url + "/{region}", timeout_s=5),
        Endpoints(alibaba_metadata=standin.url),
        {},
    )
    assert standin.paths()[-1] == "/cn-hangzhou/"
    # no credential in a URL: the form is the body
    assert all("?" not in path for _, path, _ in standin.cloud.requests)


def test_keep_charging_is_sent_and_said(standin: StandIn) -> None:
    result = stop(standin, alibaba_stopped_mode="KeepCharging")
    assert result.ok
    assert standin.cloud.stopped == [f"{INSTANCE}:KeepCharging"]
    assert result.still_bills == STILL_ALIBABA_KEEP_CHARGING


def test_a_role_without_the_permission_is_told_what_to_grant(standin: StandIn) -> None:
    standin.cloud.allowed = False
    standin.cloud.echo_credentials = True
    result = stop(standin)
    assert not result.ok
    assert "Forbidden.RAM" in result.message
    assert f"ecs:StopInstance on acs:ecs:cn-hangzhou:*:instance/{INSTANCE}" in result.message


def test_an_instance_without_a_role_says_so(standin: StandIn) -> None:
    standin.cloud.identity = False
    result = stop(standin)
    assert not result.ok
    assert "no RAM role credentials (no RAM role is attached (404))" in result.message
    assert "ecs:StopInstance" in result.message
    assert standin.cloud.ecs_calls == []


def test_a_key_the_api_does_not_know_is_named(standin: StandIn) -> None:
    standin.cloud.alibaba_known_key = "STS.another"
    result = stop(standin)
    assert not result.ok
    assert "did not accept the role's credentials (InvalidAccessKeyId.NotFound)" in result.message


def test_a_signature_refusal_quoting_the_token_encoded_twice_shows_none_of_it(
    standin: StandIn,
) -> None:
    # Alibaba's SignatureDoesNotMatch quotes the string it signed, the STS token in it
    # URL-encoded twice (NewFuture/DDNS#57): "...%26SecurityToken%3DCAIS...%252B..."
    standin.cloud.alibaba_api_secret = "another-key-secret"
    standin.cloud.echo_credentials = True
    result = stop(standin)
    assert not result.ok
    assert "SignatureDoesNotMatch" in result.message
    assert "server string to sign is:POST&%2F&AccessKeyId%3D[redacted]" in result.message
    # every secret here has "secret" in it: no part of any, in any encoding, is left
    assert "secret" not in result.message.lower()
    assert "%252B" not in result.message
    assert "%2B" not in result.message


def test_the_api_down_is_a_reason(standin: StandIn) -> None:
    closed = closed_url()
    result = stop_instance(
        machine(),
        StopSettings(alibaba_ecs_api_url=closed, timeout_s=2),
        Endpoints(alibaba_metadata=standin.url),
        {},
    )
    assert not result.ok
    assert "got no answer" in result.message
    for secret in SECRETS:
        assert secret not in result.message
    standin.cloud.allowed = False
    standin.cloud.refusal_status = 503
    result = stop(standin)
    assert not result.ok
    assert result.message.startswith("StopInstance answered 503")


def test_the_failures_are_said_in_chinese(standin: StandIn) -> None:
    standin.cloud.allowed = False
    with in_language("zh_CN"):
        result = stop(standin)
    assert "Forbidden.RAM" in result.message
    assert "ecs:StopInstance" in result.message
    assert "阿里云" in result.message


# -- the whole server: detected, priced whole, stopped --------------------------------------


class TestASpentBudgetStopsTheEcsInstance:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        yield from serve(Cloud(metadata="alibaba"))

    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, standin: StandIn) -> dict[str, object]:
        catalog = write_catalog(
            tmp_path,
            "alibaba",
            "9.00",
            instance="ecs.gn7i-c8g1.2xlarge",
            gpu_model="A10",
            usd_per_hour="1.70",
            region="cn-hangzhou",
        )
        return stop_instance_config(
            tmp_path,
            catalog,
            0.002,
            dmi_path=write_dmi(tmp_path / "dmi", "alibaba"),
            alibaba_metadata_url=standin.url,
            alibaba_ecs_api_url=standin.url,
        )

    async def test_it_is_priced_whole_then_stopped_and_the_record_says_what_bills(
        self, jp_fetch: Any, standin: StandIn
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["machine"]["provider"] == "alibaba"
        assert status["machine"]["instance_type"] == "ecs.gn7i-c8g1.2xlarge"
        assert status["machine"]["priced"] == "instance"
        assert status["machine"]["instance_price_usd_per_hour"] == 1.70

        async def acted() -> bool:
            return (await budget(jp_fetch))["state"] == "acted"

        await wait_for(acted, 60, "the stop-instance action")
        assert standin.cloud.stopped == [f"{INSTANCE}:StopCharging"]
        last = (await budget(jp_fetch))["last_action"]
        assert last["result"] == "done"
        assert last["via"] == "alibaba"
        assert last["instance"] == f"Alibaba Cloud is stopping {INSTANCE} (StopCharging)"
        assert "its disks and public IP still bill" in last["message"]
        assert "its disks still bill;" not in last["message"]
        for secret in SECRETS:
            assert secret not in json.dumps(last)
