"""Vast.ai: the instance known from the variables Vast.ai documents in every container
(``CONTAINER_ID``, ``VAST_CONTAINERLABEL``), stopped through its API with the instance's
own ``CONTAINER_API_KEY``; each failure says why, and a failed stop stops the server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cloud_server import closed_url, connections, in_language
from cloud_standins import VAST_KEY, Cloud, StandIn, serve

from jupyter_gpucost.cloud.detect import DetectSettings, Endpoints, identify
from jupyter_gpucost.cloud.stop import StopResult, StopSettings, stop_instance
from jupyter_gpucost.core.machine import STILL_VAST, Machine
from jupyter_gpucost.server.budget.enforce import (
    BrowserSaves,
    Enforcer,
    EnforceSettings,
    InstanceStop,
)
from jupyter_gpucost.server.budget.events import BudgetEvents
from jupyter_gpucost.server.budget.policy import BudgetPolicy, Enforce
from jupyter_gpucost.server.budget.record import ActionRecord

INSTANCE = "28493017"
#: what a Vast.ai container's environment holds (docs.vast.ai, Predefined Variables)
ENVIRON = {
    "CONTAINER_ID": INSTANCE,
    "VAST_CONTAINERLABEL": f"C.{INSTANCE}",
    "CONTAINER_API_KEY": VAST_KEY,
    "GPU_COUNT": "1",
}
LOG = logging.getLogger("test")


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve(Cloud())


def vast_machine() -> Machine:
    return Machine("vast", instance_id=INSTANCE, source="environment", name=f"C.{INSTANCE}")


def stop(standin: StandIn, environ: dict[str, str] = ENVIRON) -> StopResult:
    result = stop_instance(
        vast_machine(),
        StopSettings(vast_api_url=f"{standin.url}/api/v0", timeout_s=5),
        Endpoints(),
        environ,
    )
    assert VAST_KEY not in result.message
    return result


def test_the_instance_is_known_from_its_variables_without_a_packet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = connections(monkeypatch)
    found = identify(DetectSettings(dmi_path=str(tmp_path)), ENVIRON)
    assert found == vast_machine()
    assert seen == []
    # the label alone ("C.<id>") still names the instance
    only_label = identify(DetectSettings(dmi_path=str(tmp_path)), {"VAST_CONTAINERLABEL": "C.77"})
    assert only_label is not None
    assert only_label.instance_id == "77"
    assert only_label.stoppable


def test_the_instance_stops_with_its_own_key(standin: StandIn) -> None:
    result = stop(standin)
    assert result.ok, result.message
    assert result.via == "vast"
    assert result.message == f"Vast.ai is stopping instance {INSTANCE}"
    assert result.still_bills == STILL_VAST
    assert standin.cloud.stopped == [INSTANCE]
    method, path, _ = standin.cloud.requests[0]
    assert (method, path) == ("PUT", f"/api/v0/instances/{INSTANCE}/")


def test_no_key_in_the_environment_is_named(standin: StandIn) -> None:
    result = stop(standin, {k: v for k, v in ENVIRON.items() if k != "CONTAINER_API_KEY"})
    assert not result.ok
    assert "CONTAINER_API_KEY is not set" in result.message
    assert standin.cloud.requests == []


def test_a_wrong_key_and_a_refusal_say_which_key_is_needed(standin: StandIn) -> None:
    result = stop(standin, {**ENVIRON, "CONTAINER_API_KEY": "not-the-key"})
    assert not result.ok
    assert "Vast.ai refused to stop the instance (401)" in result.message
    assert "not-the-key" not in result.message
    standin.cloud.allowed = False
    standin.cloud.echo_credentials = True
    result = stop(standin)
    assert "Vast.ai refused to stop the instance (403)" in result.message
    assert standin.cloud.stopped == []


def test_another_instance_and_the_api_down_are_reasons(standin: StandIn) -> None:
    standin.cloud.vast_instance = "1"
    result = stop(standin)
    assert not result.ok
    assert result.message.startswith("Vast.ai answered 404")
    closed = closed_url()
    down = stop_instance(
        vast_machine(), StopSettings(vast_api_url=closed, timeout_s=2), Endpoints(), ENVIRON
    )
    assert not down.ok
    assert "got no answer" in down.message


def test_a_refusal_is_said_in_chinese(standin: StandIn) -> None:
    with in_language("zh_CN"):
        result = stop(standin, {**ENVIRON, "CONTAINER_API_KEY": "not-the-key"})
    assert "CONTAINER_API_KEY" in result.message
    assert "Vast.ai" in result.message
    assert "拒绝" in result.message


def stop_instance_enforcer(
    vast_stop: Callable[[], Awaitable[InstanceStop]],
    keep: Callable[[ActionRecord], Awaitable[None]],
    stop_server: Callable[[], None],
) -> Enforcer:
    """The budget's enforcer with ``stop-instance`` through ``vast_stop``, no kernels."""
    events = BudgetEvents(None, LOG, lambda: datetime.now(UTC))
    enforcer = Enforcer(
        EnforceSettings("stop-instance", 0.1, None, "$"),
        policy=BudgetPolicy(),
        saves=BrowserSaves(events, LOG),
        events=events,
        keep=keep,
        forget=lambda at: None,
        kernel_manager=None,
        stop_server=stop_server,
        log=LOG,
        clock=lambda: datetime.now(UTC),
    )
    enforcer.stop_instance = vast_stop
    return enforcer


async def test_a_failed_stop_says_why_and_stops_the_server_instead(standin: StandIn) -> None:
    kept: list[ActionRecord] = []
    stopped: list[bool] = []

    async def keep(record: ActionRecord) -> None:
        kept.append(record)

    async def vast_stop() -> InstanceStop:
        result = await asyncio.get_running_loop().run_in_executor(
            None, stop, standin, {**ENVIRON, "CONTAINER_API_KEY": "not-the-key"}
        )
        return InstanceStop(result.ok, result.via, result.message, result.still_bills)

    enforcer = stop_instance_enforcer(vast_stop, keep, lambda: stopped.append(True))
    record = await enforcer.enforce(Enforce(None, "user"))
    assert "could not stop the machine (Vast.ai refused to stop the instance (401)" in (
        record.message
    )
    assert "server stopped instead" in record.message
    await asyncio.sleep(0.7)
    assert stopped == [True]


async def test_a_stop_that_worked_says_the_disk_still_bills(standin: StandIn) -> None:
    async def vast_stop() -> InstanceStop:
        result = await asyncio.get_running_loop().run_in_executor(None, stop, standin)
        return InstanceStop(result.ok, result.via, result.message, result.still_bills)

    async def keep(record: ActionRecord) -> None:
        pass

    enforcer = stop_instance_enforcer(vast_stop, keep, lambda: None)
    record = await enforcer.enforce(Enforce(None, "user"))
    assert record.via == "vast"
    assert f"machine stopping (Vast.ai is stopping instance {INSTANCE})" in record.message
    assert record.message.endswith("its disk still bills while the instance is stopped")
