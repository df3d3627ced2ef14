"""The budget on a real Jupyter server (pytest-jupyter): API, events, the action."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError
from waiting import wait_for

from jupyter_gpucost.server.budget import EVENT_SCHEMA_ID

pytestmark = pytest.mark.usefixtures("jp_serverapp")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


async def budget(jp_fetch: Any, **params: str) -> dict[str, Any]:
    response = await jp_fetch("gpucost", "api", "budget", params=params)
    return json.loads(response.body)


async def put(jp_fetch: Any, body: object) -> dict[str, Any]:
    response = await jp_fetch("gpucost", "api", "budget", method="PUT", body=json.dumps(body))
    return json.loads(response.body)


async def refused(call: Awaitable[Any], code: int) -> str:
    with pytest.raises(HTTPClientError) as e:
        await call
    assert e.value.code == code
    assert e.value.response is not None
    return str(json.loads(e.value.response.body)["message"])


@pytest.fixture
def state_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "budget.json"


class TestWithoutLedger:
    @pytest.fixture
    def gpucost_config(self, state_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "budget_state_path": str(state_path),
            "ledger_url": "none",
        }

    async def test_day_and_month_budgets_need_the_ledger(self, jp_fetch: Any) -> None:
        assert (await budget(jp_fetch))["scopes"] == ["session"]
        for scope in ("day", "month"):
            body = {"amount_usd": 5, "scope": scope}
            assert "needs the ledger" in await refused(put(jp_fetch, body), 400)
        assert (await budget(jp_fetch))["soft"] is None


class TestDayBudgetWithTheLedger:
    @pytest.fixture
    def gpucost_config(self, state_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "minimum_charge_s": 0,
            "budget_state_path": str(state_path),
        }

    async def test_a_day_budget_counts_todays_spend(self, jp_fetch: Any) -> None:
        await asyncio.sleep(1.5)
        body = await put(jp_fetch, {"amount_usd": 10, "scope": "day"})
        soft = body["soft"]
        assert soft["scope"] == "day"
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        # a fresh ledger: today's spend is this session's
        assert soft["spent_usd"] == pytest.approx(status["today_usd"], abs=0.001)
        assert soft["spent_usd"] > 0


class TestSoftBudget:
    @pytest.fixture
    def gpucost_config(self, state_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "budget_state_path": str(state_path),
        }

    async def test_no_budget_at_first(self, jp_fetch: Any) -> None:
        body = await budget(jp_fetch)
        assert body["state"] == "none"
        assert body["hard"] is None
        assert body["soft"] is None
        assert body["thresholds_pct"] == [50, 80, 95]
        assert body["action"] == "shutdown"
        # the ledger is there (in the test data dir): day and month budgets can be set too
        assert body["scopes"] == ["session", "day", "month"]
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["budget"]["state"] == "none"

    async def test_set_show_persist_and_remove(self, jp_fetch: Any, state_path: Path) -> None:
        body = await put(jp_fetch, {"amount_usd": 25, "scope": "session"})
        soft = body["soft"]
        assert soft["amount_usd"] == 25
        assert soft["scope"] == "session"
        assert soft["locked"] is False
        assert soft["kind"] == "soft"
        assert 0 < soft["share"] < 0.1  # the 60 s minimum charge of 2 A100s: $0.11
        # $24.89 left at $6.862/h: about 3 h 38 min from now
        left_s = (datetime.fromisoformat(soft["runs_out_at"]) - datetime.now(UTC)).total_seconds()
        assert 3.5 * 3600 < left_s < 3.7 * 3600, left_s
        assert body["state"] == "ok"
        stored = read_json(state_path)
        assert stored["soft"] == {"amount_micro_usd": 25_000_000, "scope": "session"}
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["budget"]["soft"]["amount_usd"] == 25
        body = await put(jp_fetch, {"amount_usd": None})
        assert body["soft"] is None
        assert body["state"] == "none"
        assert read_json(state_path)["soft"] is None

    async def test_the_amount_may_be_sent_under_its_currency_neutral_name(
        self, jp_fetch: Any, state_path: Path
    ) -> None:
        body = await put(jp_fetch, {"amount": 12.5, "scope": "session"})
        assert body["soft"]["amount"] == body["soft"]["amount_usd"] == 12.5
        assert read_json(state_path)["soft"] == {"amount_micro_usd": 12_500_000, "scope": "session"}
        # both names, one amount however it is written: taken
        body = await put(jp_fetch, {"amount": "7.50", "amount_usd": 7.5})
        assert body["soft"]["amount"] == 7.5
        assert read_json(state_path)["soft"] == {"amount_micro_usd": 7_500_000, "scope": "session"}
        # two different amounts: refused, the budget kept as it was
        for two in ({"amount": 8, "amount_usd": 9}, {"amount": None, "amount_usd": 9}):
            message = await refused(put(jp_fetch, two), 400)
            assert "amount and amount_usd are two names for one amount" in message
            assert (await budget(jp_fetch))["soft"]["amount"] == 7.5
        body = await put(jp_fetch, {"amount": None, "amount_usd": None})
        assert body["soft"] is None
        assert read_json(state_path)["soft"] is None

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            ({"amount_usd": "abc"}, "The budget must be a number of dollars"),
            ({"amount_usd": -5}, "must be more than 0"),
            ({"amount_usd": 0}, "must be more than 0"),
            ({"amount_usd": 1.0000001}, "more than 6 decimals"),
            ({"amount_usd": 5, "scope": "week"}, "scope must be one of session, day, month"),
            ({"amount_usd": 5, "colour": "red"}, "unknown field(s) colour"),
            ({"scope": "session"}, "amount_usd is required"),
            ({"amount": "abc"}, "The budget must be a number of dollars"),
            ({"amount": 0}, "must be more than 0"),
            ({"amount": 5, "amount_usd": 0}, "must be more than 0"),
            ({"amount": 5, "amount_usd": 5.01}, "but they differ (5 and 5.01)"),
            ({"amount": 5, "colour": "red"}, "unknown field(s) colour: send amount_usd and scope"),
            ([5], "must be a JSON object"),
        ],
    )
    async def test_invalid_values_are_refused_with_a_message(
        self, jp_fetch: Any, body: object, message: str
    ) -> None:
        assert message in await refused(put(jp_fetch, body), 400)
        assert (await budget(jp_fetch))["soft"] is None

    async def test_stop_now_without_a_countdown_is_a_conflict(self, jp_fetch: Any) -> None:
        call = jp_fetch("gpucost", "api", "budget", "stop-now", method="POST", body="")
        assert "no budget countdown" in await refused(call, 409)

    async def test_a_stale_save_acknowledgement_is_a_conflict(self, jp_fetch: Any) -> None:
        body = json.dumps({"request_id": "nope", "client": "c1", "saved": [], "failed": []})
        call = jp_fetch("gpucost", "api", "budget", "saved", method="POST", body=body)
        assert "no save request" in await refused(call, 409)

    async def test_a_cookie_request_without_xsrf_is_refused(
        self, jp_fetch: Any, http_server_client: Any, jp_base_url: str, jp_serverapp: Any
    ) -> None:
        # log in the way a browser does, then write without the XSRF token
        token = jp_serverapp.identity_provider.token
        login = await http_server_client.fetch(
            f"{jp_base_url}?token={token}", follow_redirects=False, raise_error=False
        )
        cookies = "; ".join(
            c.split(";", 1)[0] for c in login.headers.get_list("Set-Cookie") if "=" in c
        )
        assert cookies
        url = f"{jp_base_url}gpucost/api/budget"
        ok = await http_server_client.fetch(url, headers={"Cookie": cookies}, raise_error=False)
        assert ok.code == 200  # the cookie is a valid login
        response = await http_server_client.fetch(
            url,
            method="PUT",
            body=json.dumps({"amount_usd": 1}),
            headers={"Cookie": cookies},
            raise_error=False,
        )
        assert response.code == 403
        assert (await budget(jp_fetch))["soft"] is None


class TestHardBudget:
    @pytest.fixture
    def gpucost_config(self, state_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "hard_budget_usd": 100,
            "budget_state_path": str(state_path),
        }

    async def test_is_locked_and_cannot_be_raised_or_removed(self, jp_fetch: Any) -> None:
        body = await budget(jp_fetch)
        assert body["hard"]["amount_usd"] == 100
        assert body["hard"]["locked"] is True
        for attempt in (
            {"kind": "hard", "amount_usd": 1000},
            {"hard_usd": 1000},
            {"hard": {"amount_usd": 1000}},
        ):
            message = await refused(put(jp_fetch, attempt), 403)
            assert "set by the administrator" in message
        # a soft budget above it does not lift it; removing the soft one leaves it
        body = await put(jp_fetch, {"amount_usd": 1000})
        assert body["hard"]["amount_usd"] == 100
        assert body["soft"]["amount_usd"] == 1000
        assert body["binding"] == "hard"
        body = await put(jp_fetch, {"amount_usd": None})
        assert body["hard"]["amount_usd"] == 100
        assert body["hard"]["locked"] is True


class TestAtTheBudget:
    @pytest.fixture
    def gpucost_config(self, state_path: Path) -> dict[str, object]:
        # 2 simulated A100s at $6.862/h: $0.0019 a second; no minimum charge
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "minimum_charge_s": 0,
            "hard_budget_usd": 0.006,
            "budget_grace_s": 2,
            "budget_save_timeout_s": 10,
            "budget_state_path": str(state_path),
        }

    async def test_warns_once_counts_down_saves_then_shuts_kernels_down(
        self, jp_fetch: Any, jp_serverapp: Any, state_path: Path
    ) -> None:
        events: list[dict[str, Any]] = []

        async def listener(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
            events.append(dict(data))
            if data["kind"] == "save-request":
                # what the browser does: save, then acknowledge
                await jp_fetch(
                    "gpucost",
                    "api",
                    "budget",
                    "saved",
                    method="POST",
                    body=json.dumps(
                        {
                            "request_id": data["request_id"],
                            "client": "page-1",
                            "saved": ["work/train.ipynb", "scratch.ipynb"],
                            "failed": [],
                        }
                    ),
                )

        jp_serverapp.event_logger.add_listener(schema_id=EVENT_SCHEMA_ID, listener=listener)
        await budget(jp_fetch, client="page-1")  # this page is then expected to save
        kernel = json.loads((await jp_fetch("api", "kernels", method="POST", body="{}")).body)

        async def acted() -> bool:
            await budget(jp_fetch, client="page-1")
            return (await budget(jp_fetch))["state"] == "acted"

        await wait_for(acted, 60, "the budget action")
        kinds = [e["kind"] for e in events]
        thresholds = [e["threshold_pct"] for e in events if e["kind"] == "threshold"]
        assert thresholds
        assert thresholds[-1] == 95
        assert len(thresholds) == len(set(thresholds))
        assert kinds.index("grace") < kinds.index("save-request") < kinds.index("action")
        grace = next(e for e in events if e["kind"] == "grace")
        assert grace["budget_kind"] == "hard"
        assert grace["grace_s"] == 2
        # the countdown starts before the budget is spent, to end when it is
        assert "budget runs out at the current rate" in grace["message"]
        kernels = json.loads((await jp_fetch("api", "kernels")).body)
        assert kernel["id"] not in [k["id"] for k in kernels]
        body = await budget(jp_fetch)
        last = body["last_action"]
        assert last["action"] == "shutdown"
        assert last["result"] == "done"
        assert last["notebooks_saved"] == 2
        assert last["kernels"] == 1
        # the $0.006 budget is announced as it is, not rounded to $0.01
        assert last["message"].startswith("stopped at $0.006 budget at ")
        assert "2 notebooks saved; 1 kernel shut down" in last["message"]
        # the kernels are stopped, the machine is not: the message says what still bills
        assert last["message"].endswith("; this machine still costs $6.86/h")
        assert last["still_usd_per_hour"] == 6.862
        # recorded on disk and in the ledger, and nothing fires again on later polls
        assert read_json(state_path)["actions"][-1]["message"] == last["message"]
        audit = json.loads((await jp_fetch("gpucost", "api", "budget", "actions")).body)
        assert audit["ledger"] is True
        [kept] = audit["actions"]
        assert kept["message"] == last["message"]
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert kept["session_id"] == status["session_id"]
        before = len(events)
        await asyncio.sleep(2)
        assert len(events) == before


class TestIdle:
    @pytest.fixture
    def gpucost_config(self, state_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "idle_gpu_minutes": 0.02,  # 1.2 s
            "idle_gpu_action": "act",
            "idle_gpu_utilization_pct": 100,  # the simulated GPUs count as idle
            "budget_grace_s": 1,
            "budget_save_timeout_s": 1,
            "budget_state_path": str(state_path),
        }

    async def test_a_busy_kernel_is_never_culled(self, jp_fetch: Any, jp_serverapp: Any) -> None:
        km = jp_serverapp.kernel_manager
        kid = await km.start_kernel(kernel_name="python3")
        client = km.get_kernel(kid).client()
        client.start_channels()
        try:
            await asyncio.wait_for(client._async_wait_for_ready(), 60)
            client.execute("import time; time.sleep(6)")

            async def busy() -> bool:
                return bool(km.get_kernel(kid).execution_state == "busy")

            await wait_for(busy, 20, "the kernel to be busy")
            # idle limit (1.2 s) + grace (1 s) pass several times over while it works
            for _ in range(20):
                await asyncio.sleep(0.2)
                assert kid in km.list_kernel_ids()
            assert (await budget(jp_fetch))["last_action"] is None

            # once it is done, the GPUs are idle and the kernel is stopped
            async def stopped() -> bool:
                return kid not in km.list_kernel_ids()

            await wait_for(stopped, 30, "the idle kernel to be shut down")
            last = (await budget(jp_fetch))["last_action"]
            assert last["reason"] == "idle"
            assert last["result"] == "done"
        finally:
            client.stop_channels()


class TestRaiseDuringCountdown:
    @pytest.fixture
    def gpucost_config(self, state_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "minimum_charge_s": 0,
            "budget_grace_s": 60,
            "budget_state_path": str(state_path),
        }

    async def test_raising_my_budget_ends_the_countdown_and_nothing_is_stopped(
        self, jp_fetch: Any, jp_serverapp: Any
    ) -> None:
        events: list[dict[str, Any]] = []

        async def listener(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
            events.append(dict(data))

        jp_serverapp.event_logger.add_listener(schema_id=EVENT_SCHEMA_ID, listener=listener)
        kernel = json.loads((await jp_fetch("api", "kernels", method="POST", body="{}")).body)
        await put(jp_fetch, {"amount_usd": 0.002})

        async def counting_down() -> bool:
            return (await budget(jp_fetch))["state"] == "grace"

        await wait_for(counting_down, 30, "the countdown")
        grace = (await budget(jp_fetch))["grace"]
        assert grace["can_raise"] is True
        assert 0 < grace["remaining_s"] <= 60
        body = await put(jp_fetch, {"amount_usd": 50})
        assert body["state"] in ("ok", "warning")
        assert body["grace"] is None
        assert any(e["kind"] == "cleared" for e in events)
        await asyncio.sleep(1.5)
        kernels = json.loads((await jp_fetch("api", "kernels")).body)
        assert kernel["id"] in [k["id"] for k in kernels]
        assert (await budget(jp_fetch))["last_action"] is None

    async def test_save_and_stop_now_acts_at_once(self, jp_fetch: Any) -> None:
        await jp_fetch("api", "kernels", method="POST", body="{}")
        await put(jp_fetch, {"amount_usd": 0.002})

        async def counting_down() -> bool:
            return (await budget(jp_fetch))["state"] == "grace"

        await wait_for(counting_down, 30, "the countdown")
        await jp_fetch("gpucost", "api", "budget", "stop-now", method="POST", body="")

        async def acted() -> bool:
            return (await budget(jp_fetch))["state"] == "acted"

        # well before the 60 s grace period would have ended
        await wait_for(acted, 15, "the action after 'Save and stop now'")
        assert json.loads((await jp_fetch("api", "kernels")).body) == []


class TestIdleWarnOnly:
    @pytest.fixture
    def gpucost_config(self, state_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "idle_gpu_minutes": 0.01,  # 0.6 s
            "idle_gpu_utilization_pct": 100,  # the simulated GPUs count as idle
            "budget_grace_s": 0,
            "budget_state_path": str(state_path),
        }

    async def test_warns_once_and_stops_nothing(self, jp_fetch: Any, jp_serverapp: Any) -> None:
        events: list[dict[str, Any]] = []

        async def listener(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
            events.append(dict(data))

        jp_serverapp.event_logger.add_listener(schema_id=EVENT_SCHEMA_ID, listener=listener)
        kernel = json.loads((await jp_fetch("api", "kernels", method="POST", body="{}")).body)

        async def warned() -> bool:
            return any(e["kind"] == "idle" for e in events)

        await wait_for(warned, 20, "the idle warning")
        await asyncio.sleep(3)
        assert [e["kind"] for e in events] == ["idle"]
        assert "idle for 0.01 minutes while costing money." in events[0]["message"]
        body = await budget(jp_fetch)
        assert body["idle"]["action"] == "warn"
        assert body["idle"]["idle_s"] >= 0.6
        assert body["last_action"] is None
        kernels = json.loads((await jp_fetch("api", "kernels")).body)
        assert kernel["id"] in [k["id"] for k in kernels]
