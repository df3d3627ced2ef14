"""Google Cloud's and Azure's notices through a real server: a spot VM detected from its
metadata, the notice answered as documented (GCE ``instance/preempted`` turning ``TRUE``
behind a hanging GET; an Azure Scheduled Events ``Preempt``), the steps run and recorded."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, StandIn, azure_preempt, serve, write_dmi
from test_budget_api import budget, wait_for

pytestmark = pytest.mark.usefixtures("jp_serverapp")


@pytest.fixture
def provider() -> str:
    return "gcp"


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch, provider: str) -> Iterator[StandIn]:
    cloud = Cloud()
    cloud.azure_compute["priority"] = "Spot"
    for s in serve(cloud):
        monkeypatch.setenv("GCE_METADATA_HOST", s.host)
        yield s


@pytest.fixture
def gpucost_config(standin: StandIn, tmp_path: Path, provider: str) -> dict[str, object]:
    return {
        "telemetry": "simulated",
        "sample_interval_s": 0.2,
        "dmi_path": write_dmi(tmp_path / "dmi", provider),
        "azure_imds_url": standin.url,
        "budget_state_path": str(tmp_path / "budget.json"),
        "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}",
    }


async def answered(jp_fetch: Any) -> dict[str, Any]:
    async def recorded() -> bool:
        current = ((await budget(jp_fetch)).get("interruption") or {}).get("current")
        return bool(current and "session_cost_micro_usd" in current)

    await wait_for(recorded, 30, "the interruption's steps to end")
    return dict((await budget(jp_fetch))["interruption"]["current"])


async def test_gcp_preemption(jp_fetch: Any, standin: StandIn) -> None:
    path = "/computeMetadata/v1/instance/preempted?wait_for_change=true&timeout_sec=60"

    async def watching() -> bool:
        return path in standin.paths()

    await wait_for(watching, 10, "the hanging GET on instance/preempted")
    seen = datetime.now(UTC)
    standin.cloud.gce_preempted = True
    current = await answered(jp_fetch)
    assert current["provider"] == "gcp"
    assert current["interruption_action"] == "preempt"
    deadline = datetime.fromisoformat(current["deadline"])
    # the documented 30 seconds from when the change was seen
    assert seen + timedelta(seconds=29) <= deadline <= seen + timedelta(seconds=32)
    assert current["instance_type"] == "a3-highgpu-1g"


class TestAzure:
    @pytest.fixture
    def provider(self) -> str:
        return "azure"

    async def test_azure_preempt_event(self, jp_fetch: Any, standin: StandIn) -> None:
        async def watching() -> bool:
            return "/metadata/scheduledevents?api-version=2020-07-01" in standin.paths()

        await wait_for(watching, 10, "the Scheduled Events document to be asked")
        not_before = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=30)
        standin.cloud.azure_events = [azure_preempt(format_datetime(not_before, usegmt=True))]
        current = await answered(jp_fetch)
        assert current["provider"] == "azure"
        assert datetime.fromisoformat(current["deadline"]) == not_before
        assert current["instance_type"] == "Standard_NC24ads_A100_v4"
        assert datetime.now(UTC) < not_before
