"""No GPU seen is a state, not $0: through a real Jupyter server whose NVML cannot start
(the binding finds no ``libnvidia-ml.so``, as in a container without the driver's library).

* nothing to price the machine by: the cost is unknown, said with its reason, and a budget is
  refused with the sentence that says why;
* a detected instance with a whole-instance row: priced whole from its instance, whatever
  NVML says, and labelled so; a budget can act on that.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest
from cloud_standins import Cloud, StandIn, serve, write_dmi
from nvml_stub import DRIVER_550, FakeNvml
from tornado.httpclient import HTTPClientError

from jupyter_gpucost.core.metering import metering

REFUSAL = "no GPU is metered: a budget cannot act"
NO_LIBRARY = "libnvidia-ml.so not found: no NVIDIA driver on this machine"


@pytest.fixture
def no_library(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """The binding is installed; the driver's library is not (what nvmlInit raises then)."""
    missing = pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    nvml = FakeNvml([], DRIVER_550, init_error=missing)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml


async def status(jp_fetch: Any) -> dict[str, Any]:
    return json.loads((await jp_fetch("gpucost", "api", "status")).body)


async def put_budget(jp_fetch: Any, amount: float) -> Any:
    body = json.dumps({"amount_usd": amount, "scope": "session"})
    return await jp_fetch("gpucost", "api", "budget", method="PUT", body=body)


class TestNoNvmlAndNoKnownMachine:
    @pytest.fixture
    def gpucost_config(self, no_library: FakeNvml, tmp_path: Path) -> dict[str, object]:
        return {
            "telemetry": "nvml",
            "sample_interval_s": 0.2,
            "ledger_url": "none",
            "budget_state_path": str(tmp_path / "budget.json"),
        }

    async def test_the_cost_is_unknown_with_its_reason(self, jp_fetch: Any) -> None:
        shown = await status(jp_fetch)
        assert shown["gpus"] == []
        assert shown["telemetry"]["available"] is False
        assert shown["metering"]["state"] == "unknown"
        assert shown["metering"]["reason"] == NO_LIBRARY
        assert shown["metering"]["message"] == (
            f"No GPU is metered ({NO_LIBRARY}): the machine may still bill, and a budget "
            "cannot act."
        )
        assert shown["metering"]["budget"] == REFUSAL

    async def test_a_budget_is_refused_with_the_sentence(self, jp_fetch: Any) -> None:
        with pytest.raises(HTTPClientError) as refused:
            await put_budget(jp_fetch, 5)
        assert refused.value.code == 409
        assert refused.value.response is not None
        assert json.loads(refused.value.response.body)["message"] == REFUSAL
        # nothing was set
        body = json.loads((await jp_fetch("gpucost", "api", "budget")).body)
        assert body["soft"] is None
        # removing a budget is never refused
        removed = await jp_fetch(
            "gpucost", "api", "budget", method="PUT", body=json.dumps({"amount_usd": None})
        )
        assert removed.code == 200


class TestNoNvmlOnAKnownInstance:
    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        yield from serve(Cloud())

    @pytest.fixture
    def gpucost_config(
        self,
        no_library: FakeNvml,
        tmp_path: Path,
        standin: StandIn,
        monkeypatch: pytest.MonkeyPatch,
    ) -> dict[str, object]:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", standin.url)
        return {
            "telemetry": "nvml",
            "sample_interval_s": 0.2,
            "minimum_charge_s": 0,
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "ledger_url": "none",
            "budget_state_path": str(tmp_path / "budget.json"),
        }

    async def test_it_is_priced_whole_from_its_instance_and_says_so(self, jp_fetch: Any) -> None:
        first = await status(jp_fetch)
        assert first["gpus"] == []
        assert first["machine"]["instance_type"] == "p5.48xlarge"
        assert first["machine"]["priced"] == "instance"
        # the whole instance, not its 0 of 8 GPU shares
        assert first["rate_usd_per_hour"] == 55.04
        assert first["base_price_usd_per_hour"] == 55.04
        metering_doc = first["metering"]
        assert metering_doc["state"] == "instance"
        assert metering_doc["instance"] == "p5.48xlarge"
        assert metering_doc["budget"] is None
        message = (
            f"No GPU is seen ({NO_LIBRARY}): the p5.48xlarge is priced whole from its "
            "instance, $55.04/h."
        )
        assert metering_doc["message"] == message
        codes = {w["code"]: w["message"] for w in first["warnings"]}
        assert codes["instance-whole"] == message
        assert "instance-gpus" not in codes
        # it bills: the cost rises with the time
        await asyncio.sleep(1.2)
        later = await status(jp_fetch)
        assert later["cost_usd"] > first["cost_usd"] > 0

    async def test_a_budget_can_act_on_the_whole_instance(self, jp_fetch: Any) -> None:
        answer = await put_budget(jp_fetch, 50)
        assert json.loads(answer.body)["soft"]["amount_usd"] == 50


def test_the_rule_in_order() -> None:
    # a GPU seen is metered, whatever else holds
    assert metering(1, telemetry_reason=None, whole_instance="p5.48xlarge").state == "gpus"
    assert metering(1, telemetry_reason=None, whole_instance=None).budget_refusal is None
    # none seen: the instance priced whole where one is known, else unknown
    whole = metering(0, telemetry_reason="off", whole_instance="g5.xlarge")
    assert (whole.state, whole.reason, whole.budget_refusal) == ("instance", "off", None)
    unknown = metering(0, telemetry_reason=None, whole_instance=None)
    assert unknown.state == "unknown"
    assert unknown.reason == "NVML lists no GPU this server may use"
    assert unknown.budget_refusal == REFUSAL
