"""Lambda: no documented signal inside an instance, so the admin names it
(``machine_provider = "lambda"``, ``machine_instance_id``, an API key); its type is then read
from Lambda's Cloud API to price it whole, and ``stop-instance`` terminates it (Lambda's
instances cannot be stopped). Wrong key, no permission, an unknown instance and the API
down each say why; the key is never shown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud_server import closed_url, connections, in_language, stop_instance_config, write_catalog
from cloud_standins import LAMBDA_KEY, Cloud, StandIn, serve
from test_budget_api import budget, wait_for

from jupyter_gpucost.cloud.detect import DetectSettings, Endpoints, identify
from jupyter_gpucost.cloud.stop import StopResult, StopSettings, stop_instance
from jupyter_gpucost.core.machine import STILL_LAMBDA, Machine

INSTANCE = "0920582c7ff041399e34823a0be62549"


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve(Cloud())


def lambda_machine() -> Machine:
    return Machine(
        "lambda",
        "gpu_1x_a100_sxm4",
        "us-east-1",
        "on-demand",
        INSTANCE,
        source="setting+api",
    )


def detect(tmp_path: Path, standin: StandIn, key: str = LAMBDA_KEY) -> Machine | None:
    return identify(
        DetectSettings(
            dmi_path=str(tmp_path),
            provider="lambda",
            instance_id=INSTANCE,
            lambda_api_url=f"{standin.url}/api/v1",
            lambda_api_key=key,
        ),
        {},
    )


def stop(
    standin: StandIn, key: str = LAMBDA_KEY, environ: dict[str, str] | None = None
) -> StopResult:
    result = stop_instance(
        lambda_machine(),
        StopSettings(lambda_api_url=f"{standin.url}/api/v1", lambda_api_key=key, timeout_s=5),
        Endpoints(),
        environ or {},
    )
    assert LAMBDA_KEY not in result.message
    return result


def test_the_named_instance_is_read_from_the_cloud_api(tmp_path: Path, standin: StandIn) -> None:
    assert detect(tmp_path, standin) == lambda_machine()
    assert standin.paths() == [f"/api/v1/instances/{INSTANCE}"]


def test_without_the_setting_nothing_names_lambda_and_nothing_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = connections(monkeypatch)
    assert identify(DetectSettings(dmi_path=str(tmp_path)), {"LAMBDA_API_KEY": "k"}) is None
    assert seen == []


def test_a_wrong_key_leaves_the_named_instance_with_the_reason(
    tmp_path: Path, standin: StandIn
) -> None:
    found = detect(tmp_path, standin, key="not-the-key")
    assert found is not None
    assert (found.provider, found.instance_id, found.instance_type) == ("lambda", INSTANCE, "")
    assert found.source == "setting"
    assert "401" in found.note
    assert "global/invalid-api-key" in found.note


def test_stop_instance_terminates_it_and_says_what_still_bills(standin: StandIn) -> None:
    result = stop(standin)
    assert result.ok, result.message
    assert result.via == "lambda"
    assert result.message == f"Lambda is terminating instance {INSTANCE}"
    assert result.still_bills == STILL_LAMBDA
    assert standin.cloud.stopped == [INSTANCE]
    # the key may also come from LAMBDA_API_KEY
    standin.cloud.stopped.clear()
    assert stop(standin, key="", environ={"LAMBDA_API_KEY": LAMBDA_KEY}).ok
    assert standin.cloud.stopped == [INSTANCE]


def test_no_key_wrong_key_and_no_permission_say_why(standin: StandIn) -> None:
    none = stop(standin, key="")
    assert not none.ok
    assert "no Lambda API key" in none.message
    wrong = stop(standin, key="not-the-key")
    assert "Lambda did not accept the API key (401 global/invalid-api-key" in wrong.message
    standin.cloud.allowed = False
    standin.cloud.echo_credentials = True
    refused = stop(standin)
    assert "Lambda refused to terminate the instance (403 global/account-inactive" in (
        refused.message
    )
    assert "allowed to terminate instances" in refused.message
    assert standin.cloud.stopped == []


def test_an_unknown_instance_and_the_api_down_are_reasons(standin: StandIn) -> None:
    standin.cloud.lambda_instance = "another"
    gone = stop(standin)
    assert gone.message.startswith("Lambda answered 404: global/object-does-not-exist")
    closed = closed_url()
    down = stop_instance(
        lambda_machine(),
        StopSettings(lambda_api_url=closed, lambda_api_key=LAMBDA_KEY, timeout_s=2),
        Endpoints(),
        {},
    )
    assert not down.ok
    assert "got no answer" in down.message


def test_a_refusal_is_said_in_chinese(standin: StandIn) -> None:
    standin.cloud.allowed = False
    with in_language("zh_CN"):
        result = stop(standin)
    assert "global/account-inactive" in result.message
    assert "拒绝" in result.message


# -- the whole server: priced whole from the named type, terminated at the budget ----------


class TestASpentBudgetTerminatesTheLambdaInstance:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        yield from serve(Cloud())

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("LAMBDA_API_KEY", LAMBDA_KEY)
        catalog = write_catalog(
            tmp_path,
            "lambda",
            "2.99",
            instance="gpu_1x_a100_sxm4",
            gpu_model="A100-40GB",
            usd_per_hour="1.29",
        )
        return stop_instance_config(
            tmp_path,
            catalog,
            0.001,
            dmi_path=str(tmp_path / "no-dmi"),
            machine_provider="lambda",
            machine_instance_id=INSTANCE,
            lambda_api_url=f"{standin.url}/api/v1",
        )

    async def test_it_is_priced_whole_then_terminated(
        self, jp_fetch: Any, standin: StandIn
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        machine = status["machine"]
        assert (machine["provider"], machine["instance_type"]) == ("lambda", "gpu_1x_a100_sxm4")
        assert machine["priced"] == "instance"
        assert machine["instance_price_usd_per_hour"] == 1.29
        assert LAMBDA_KEY not in json.dumps(status)

        async def acted() -> bool:
            return (await budget(jp_fetch))["state"] == "acted"

        await wait_for(acted, 60, "the stop-instance action")
        assert standin.cloud.stopped == [INSTANCE]
        last = (await budget(jp_fetch))["last_action"]
        assert last["via"] == "lambda"
        assert f"machine stopping (Lambda is terminating instance {INSTANCE})" in last["message"]
        assert "persistent filesystems still bill" in last["message"]
        assert LAMBDA_KEY not in json.dumps(last)
