"""The status pushed on the event bus: a real Jupyter server (pytest-jupyter), its websocket."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

import pytest

from jupyter_gpucost.server.status_events import (
    STATUS_EVENT_SCHEMA_ID,
    StatusPublisher,
    listeners,
)


async def next_status_event(ws: Any, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no status event in {timeout_s} s")
        message = await asyncio.wait_for(ws.read_message(), left)
        assert message is not None, "the event socket closed"
        event = json.loads(message)
        if event.get("schema_id") == STATUS_EVENT_SCHEMA_ID:
            return event


class TestOnARealServer:
    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        # no minimum charge: the amount rises from the first second
        return {"telemetry": "simulated", "sample_interval_s": 0.2, "minimum_charge_s": 0}

    async def test_a_page_on_the_event_socket_receives_the_status_and_sees_it_rise(
        self, jp_serverapp: Any, jp_fetch: Any, jp_ws_fetch: Any
    ) -> None:
        ws = await jp_ws_fetch("api", "events", "subscribe")
        try:
            first = await next_status_event(ws, 10)
            # the same document as GET /gpucost/api/status
            response = await jp_fetch("gpucost", "api", "status")
            fetched = json.loads(response.body)
            assert set(first["status"]) == set(fetched)
            assert first["status"]["session_id"] == fetched["session_id"]
            assert first["status"]["telemetry"]["simulated"] is True
            assert first["heartbeat_s"] >= first["interval_s"] >= 1
            # the simulated GPUs cost money: the next events carry a higher amount
            later = first
            deadline = time.monotonic() + 10
            while later["status"]["cost_usd"] <= first["status"]["cost_usd"]:
                assert time.monotonic() < deadline, "the pushed cost never rose"
                later = await next_status_event(ws, 5)
            assert later["status"]["as_of"] > first["status"]["as_of"]
        finally:
            ws.close()

    async def test_each_open_socket_counts_as_a_listening_page(
        self, jp_serverapp: Any, jp_ws_fetch: Any
    ) -> None:
        logger = jp_serverapp.event_logger
        before = listeners(logger)
        sockets = [await jp_ws_fetch("api", "events", "subscribe") for _ in range(2)]
        try:
            assert listeners(logger) == before + 2
        finally:
            for ws in sockets:
                ws.close()

    async def test_the_status_events_arrive_at_the_sampling_cadence_not_faster(
        self, jp_serverapp: Any
    ) -> None:
        received: list[float] = []

        async def listener(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
            received.append(time.monotonic())

        jp_serverapp.event_logger.add_listener(schema_id=STATUS_EVENT_SCHEMA_ID, listener=listener)
        try:
            await asyncio.sleep(3.6)
        finally:
            jp_serverapp.event_logger.remove_listener(
                schema_id=STATUS_EVENT_SCHEMA_ID, listener=listener
            )
        # sampled every 0.2 s, published at most once a second
        assert 2 <= len(received) <= 5
        gaps = [b - a for a, b in itertools.pairwise(received)]
        assert min(gaps) >= 0.9


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def status(cost: float, as_of: str) -> dict[str, Any]:
    return {"cost_usd": cost, "as_of": as_of, "elapsed_s": 1.0, "samples": 3}


class TestThrottle:
    def make(
        self, documents: list[dict[str, Any]], audience: list[int]
    ) -> tuple[StatusPublisher, list[dict[str, Any]], Clock]:
        sent: list[dict[str, Any]] = []
        clock = Clock()
        publisher = StatusPublisher(
            lambda: documents[-1],
            sent.append,
            interval_s=1,
            audience=lambda: audience[-1],
            heartbeat_s=10,
            clock=clock,
        )
        return publisher, sent, clock

    def test_an_unchanged_status_is_sent_again_only_at_the_heartbeat(self) -> None:
        documents = [status(1.0, "t0")]
        publisher, sent, clock = self.make(documents, [1])
        assert publisher.tick()
        for second in range(1, 10):
            clock.now = second
            documents.append(status(1.0, f"t{second}"))  # only the clock moved
            assert not publisher.tick()
        clock.now = 10
        assert publisher.tick()
        assert [s["status"]["as_of"] for s in sent] == ["t0", "t9"]

    def test_a_changed_amount_is_sent_at_once(self) -> None:
        documents = [status(1.0, "t0")]
        publisher, sent, clock = self.make(documents, [1])
        publisher.tick()
        clock.now = 1
        documents.append(status(1.01, "t1"))
        assert publisher.tick()
        assert sent[-1]["status"]["cost_usd"] == 1.01

    def test_nothing_is_built_while_no_one_listens_and_a_new_page_gets_it_at_once(
        self,
    ) -> None:
        built: list[int] = []
        audience = [0]
        sent: list[dict[str, Any]] = []
        clock = Clock()

        def build() -> dict[str, Any]:
            built.append(1)
            return status(1.0, "t")

        publisher = StatusPublisher(
            build, sent.append, interval_s=1, audience=lambda: audience[-1], clock=clock
        )
        assert not publisher.tick()
        assert built == []
        audience.append(1)
        assert publisher.tick()
        clock.now = 1
        assert not publisher.tick()
        audience.append(2)  # a second page opened: it hears the status now
        clock.now = 2
        assert publisher.tick()
        assert len(sent) == 2


@pytest.mark.parametrize("interval_s", [0.1, 0.5])
def test_never_more_than_once_a_second(interval_s: float) -> None:
    publisher = StatusPublisher(dict, lambda _: None, interval_s=interval_s)
    assert publisher.period_s == 1.0


class TestSaveRequestReachesListeningPages:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Any) -> dict[str, object]:
        # 2 simulated A100s at $6.862/h: the $0.006 budget is spent in about 3 s
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "minimum_charge_s": 0,
            "hard_budget_usd": 0.006,
            "budget_grace_s": 2,
            "budget_save_timeout_s": 20,
            "budget_state_path": str(tmp_path / "budget.json"),
        }

    async def test_a_page_that_only_listens_is_waited_for_before_the_action(
        self, jp_serverapp: Any, jp_fetch: Any, jp_ws_fetch: Any
    ) -> None:
        # the page never reads the budget route: it only listens on the event bus
        ws = await jp_ws_fetch("api", "events", "subscribe")
        acked_at: list[float] = []
        try:
            deadline = time.monotonic() + 60
            while not acked_at:
                assert time.monotonic() < deadline, "no save request reached the page"
                message = await asyncio.wait_for(ws.read_message(), 30)
                assert message is not None
                event = json.loads(message)
                if event.get("kind") != "save-request":
                    continue
                await asyncio.sleep(1.5)  # a slow save
                await jp_fetch(
                    "gpucost",
                    "api",
                    "budget",
                    "saved",
                    method="POST",
                    body=json.dumps(
                        {
                            "request_id": event["request_id"],
                            "client": "listening-page",
                            "saved": ["work.ipynb"],
                            "failed": [],
                        }
                    ),
                )
                acked_at.append(time.monotonic())

            async def last_action() -> dict[str, Any] | None:
                body = json.loads((await jp_fetch("gpucost", "api", "budget")).body)
                return body["last_action"]  # type: ignore[no-any-return]

            while (await last_action()) is None:
                assert time.monotonic() < deadline, "no budget action"
                await asyncio.sleep(0.2)
            last = await last_action()
            assert last is not None
            assert last["notebooks_saved"] == 1
            assert last["browsers"] == 1
        finally:
            ws.close()


def test_a_save_request_waits_for_the_named_pages_and_as_many_listening_ones() -> None:
    import logging
    from datetime import UTC, datetime

    from jupyter_gpucost.server.budget.enforce import BrowserSaves, SaveRequest
    from jupyter_gpucost.server.budget.events import BudgetEvents

    log = logging.getLogger("test")
    saves = BrowserSaves(BudgetEvents(None, log, lambda: datetime.now(UTC)), log)
    # one page polls (named "polling"), two more listen on the event bus (not named)
    request = SaveRequest("r1", 0.0, {"polling"}, {}, pages=2)
    saves.request = request

    def ack(client: str) -> bool:
        return saves.acknowledge("r1", client, [], [])

    assert ack("listening-1")
    assert ack("listening-2")
    assert not request.done.is_set()  # the polling page has not answered
    assert ack("polling")
    assert request.done.is_set()


def test_a_save_request_is_not_done_when_only_the_polling_page_answered() -> None:
    import logging
    from datetime import UTC, datetime

    from jupyter_gpucost.server.budget.enforce import BrowserSaves, SaveRequest
    from jupyter_gpucost.server.budget.events import BudgetEvents

    log = logging.getLogger("test")
    saves = BrowserSaves(BudgetEvents(None, log, lambda: datetime.now(UTC)), log)
    request = SaveRequest("r2", 0.0, {"polling"}, {}, pages=2)
    saves.request = request
    assert saves.acknowledge("r2", "polling", [], [])
    # the two pages on the event bus have not saved yet: the budget must still wait
    assert not request.done.is_set()
    assert saves.acknowledge("listening-1", "r2", [], []) is False  # wrong request id
    assert saves.acknowledge("r2", "listening-1", [], [])
    assert not request.done.is_set()
    assert saves.acknowledge("r2", "listening-2", [], [])
    assert request.done.is_set()
