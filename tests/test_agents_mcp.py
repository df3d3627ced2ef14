"""The agents' MCP endpoint on a real Jupyter server (pytest-jupyter, simulated 2 × A100 at
$6.862/h), called with the MCP SDK's own client (``mcp.client.streamable_http``) over HTTP:
the tools listed, each answering with the status route's figures, 403 without a token, an
estimate within 1 % of what the measured cell then cost, a budget an agent can lower and
never raise, and a cell run by a client that is not a browser stopped by the budget."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from jupyter_client.session import Session
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from test_budget_api import budget, refused, wait_for
from test_wire_contract import usd_twins

# http_server_client: the fixture that makes the test server accept connections on its port
pytestmark = pytest.mark.usefixtures("jp_serverapp", "http_server_client")

TOOLS = {"cost_status", "estimate", "cell_costs", "set_budget", "stop_when_done"}
HARD_USD = 5.0


def mcp_url(port: int, base_url: str) -> str:
    return f"http://127.0.0.1:{port}{base_url}gpucost/mcp"


@asynccontextmanager
async def agent(
    jp_http_port: int, jp_base_url: str, jp_serverapp: Any, token: str | None = None
) -> AsyncIterator[ClientSession]:
    """An MCP client session as an agent opens one, with the server's token."""
    token = jp_serverapp.identity_provider.token if token is None else token
    headers = {"Authorization": f"token {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        url = mcp_url(jp_http_port, jp_base_url)
        async with (
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await asyncio.wait_for(session.initialize(), 30)
            yield session


async def call(session: ClientSession, tool: str, **arguments: object) -> dict[str, Any]:
    result = await asyncio.wait_for(session.call_tool(tool, arguments), 30)
    assert not result.is_error, result.content
    answer: dict[str, Any] = result.structured_content
    # the same answer as text, for clients that read only the text
    assert json.loads(result.content[0].text) == answer  # type: ignore[union-attr]
    return answer


async def refusal(session: ClientSession, tool: str, **arguments: object) -> str:
    result = await asyncio.wait_for(session.call_tool(tool, arguments), 30)
    assert result.is_error, result
    return str(result.content[0].text)  # type: ignore[union-attr]


@asynccontextmanager
async def kernel_client(km: Any) -> AsyncIterator[tuple[str, Any]]:
    """A kernel the server started, and a jupyter_client client of it (not a browser)."""
    kid = await km.start_kernel(kernel_name="python3")
    client = km.get_kernel(kid).client()
    client.start_channels()
    try:
        await asyncio.wait_for(client._async_wait_for_ready(), 60)
        yield kid, client
    finally:
        client.stop_channels()
        await km.shutdown_kernel(kid)


async def status(jp_fetch: Any) -> dict[str, Any]:
    return dict(json.loads((await jp_fetch("gpucost", "api", "status")).body))


def config(tmp_path: Path, **more: object) -> dict[str, object]:
    return {
        "telemetry": "simulated",
        "sample_interval_s": 0.5,
        "minimum_charge_s": 0,
        "hard_budget_usd": HARD_USD,
        "budget_state_path": str(tmp_path / "budget.json"),
        **more,
    }


def assert_twins(answer: dict[str, Any], *expected: str) -> None:
    """Every ``_usd`` amount of a tool's answer has its currency-neutral twin with its value
    (docs/api.md, "Money keys"), and the ``expected`` ones are among them."""
    twins = usd_twins(answer)
    assert {path: pair for path, pair in twins.items() if pair[0] != pair[1]} == {}
    assert set(expected) <= set(twins), sorted(twins)


class TestTools:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path) -> dict[str, object]:
        return config(tmp_path)

    async def test_the_tools_are_listed_with_schemas_an_agent_can_act_on(
        self, jp_http_port: int, jp_base_url: str, jp_serverapp: Any
    ) -> None:
        async with agent(jp_http_port, jp_base_url, jp_serverapp) as session:
            listed = (await session.list_tools()).tools
        assert {t.name for t in listed} == TOOLS
        by_name = {t.name: t for t in listed}
        for tool in listed:
            assert tool.description is not None
            assert len(tool.description) > 60, tool.name
            assert tool.input_schema["type"] == "object"
            assert tool.input_schema["additionalProperties"] is False
            for name, prop in tool.input_schema["properties"].items():
                assert prop["description"], (tool.name, name)
        assert by_name["set_budget"].input_schema["required"] == ["amount_usd"]
        assert "only lower" in str(by_name["set_budget"].description)
        assert by_name["cost_status"].annotations.read_only_hint is True  # type: ignore[union-attr]
        assert by_name["stop_when_done"].annotations.read_only_hint is False  # type: ignore[union-attr]
        actions = by_name["stop_when_done"].input_schema["properties"]["action"]["enum"]
        assert set(actions) == {"interrupt", "shutdown", "stop-server", "stop-instance"}

    async def test_no_event_stream_is_left_open(self, jp_fetch: Any) -> None:
        # stateless and JSON: GET (an event stream) and DELETE (a session) are not offered
        for method in ("GET", "DELETE"):
            answer = await asyncio.wait_for(
                jp_fetch("gpucost", "mcp", method=method, raise_error=False), 15
            )
            assert answer.code == 405, method

    async def test_cost_status_answers_the_status_route_s_figures(
        self, jp_fetch: Any, jp_http_port: int, jp_base_url: str, jp_serverapp: Any
    ) -> None:
        async with agent(jp_http_port, jp_base_url, jp_serverapp) as session:
            # the status and the tool read the same sample when their as_of is the same
            for _ in range(40):
                answer = await call(session, "cost_status")
                document = await status(jp_fetch)
                if document["as_of"] == answer["as_of"]:
                    break
            else:
                raise AssertionError("no status of the same sample as the tool's in 40 tries")
        for key in (
            "cost_usd",
            "rate_usd_per_hour",
            "elapsed_s",
            "session_id",
            "currency",
            "currency_symbol",
            "today_usd",
            "prices",
            "billing",
            "machine",
            "price_basis",
        ):
            assert answer[key] == document[key], key
        assert answer["rate_usd_per_hour"] == 6.862
        assert [g["model"] for g in answer["gpus"]] == ["A100-80GB", "A100-80GB"]
        assert [g["price_usd_per_hour"] for g in answer["gpus"]] == [
            g["price_usd_per_hour"] for g in document["gpus"]
        ]
        hard = answer["budget"]["hard"]
        assert hard["amount_usd"] == HARD_USD == document["budget"]["hard"]["amount_usd"]
        assert hard["spent_usd"] == document["budget"]["hard"]["spent_usd"] == answer["cost_usd"]
        assert answer["budget"]["binding"] == "hard"
        assert answer["summary"].startswith("This session has cost $")
        # each amount under its currency-neutral name too, the status route's own
        for new, old in (
            ("cost", "cost_usd"),
            ("rate_per_hour", "rate_usd_per_hour"),
            ("gpu_cost", "gpu_cost_usd"),
            ("idle_cost", "idle_cost_usd"),
            ("base_price_per_hour", "base_price_usd_per_hour"),
            ("today", "today_usd"),
            ("month", "month_usd"),
        ):
            assert answer[new] == document[new] == answer[old], new
        assert answer["rate_per_hour"] == 6.862
        assert [g["price_per_hour"] for g in answer["gpus"]] == [3.431, 3.431]
        assert answer["budget"]["hard"]["amount"] == HARD_USD
        assert answer["budget"]["hard"]["spent"] == answer["cost"]
        assert_twins(answer, "$.gpus[0].price_usd_per_hour", "$.budget.hard.amount_usd")

    async def test_cell_costs_lists_the_session_s_dearest_cells(
        self, jp_fetch: Any, jp_http_port: int, jp_base_url: str, jp_serverapp: Any
    ) -> None:
        ended = "2026-11-29T08:00:10+00:00"
        for cell, notebook, cost, busy in (
            ("a", "train.ipynb", 0.5, 60.0),
            ("b", "train.ipynb", 0.25, 30.0),
            ("c", "eval.ipynb", 0.6, 10.0),
        ):
            record = {
                "cell_id": cell,
                "notebook_path": notebook,
                "started": "2026-11-29T08:00:00+00:00",
                "ended": ended,
                "wall_s": 10.0,
                "cost_usd": cost,
                "gpu_busy_s": {"0": busy},
            }
            await jp_fetch("gpucost", "api", "cells", method="POST", body=json.dumps(record))
        async with agent(jp_http_port, jp_base_url, jp_serverapp) as session:
            answer = await call(session, "cell_costs", limit=2)
            assert "limit must be" in await refusal(session, "cell_costs", limit=0)
        assert [c["cell_id"] for c in answer["cells"]] == ["c", "a"]
        # the cells route's records, the same figures
        route = json.loads((await jp_fetch("gpucost", "api", "cells")).body)["cells"]
        by_id = {c["cell_id"]: c for c in route}
        for listed in answer["cells"]:
            assert listed["cost_usd"] == by_id[listed["cell_id"]]["cost_usd"]
            assert listed["wall_s"] == by_id[listed["cell_id"]]["wall_s"]
        assert answer["cells"][1]["gpu_busy_s"] == 60.0
        assert answer["total_usd"] == 1.35
        assert answer["total"] == 1.35
        assert [c["cost"] for c in answer["cells"]] == [0.6, 0.5]
        assert_twins(answer, "$.total_usd", "$.cells[1].cost_usd", "$.notebooks[1].cost_usd")
        assert answer["notebooks"] == [
            {
                "notebook_path": "train.ipynb",
                "cost": 0.75,
                "cost_usd": 0.75,
                "cells": 2,
                "wall_s": 20.0,
                "gpu_busy_s": 90.0,
            },
            {
                "notebook_path": "eval.ipynb",
                "cost": 0.6,
                "cost_usd": 0.6,
                "cells": 1,
                "wall_s": 10.0,
                "gpu_busy_s": 10.0,
            },
        ]

    async def test_set_budget_lowers_and_never_raises(
        self, jp_fetch: Any, jp_http_port: int, jp_base_url: str, jp_serverapp: Any
    ) -> None:
        async with agent(jp_http_port, jp_base_url, jp_serverapp) as session:
            for amount in (10, 5, "5.000001"):
                message = await refusal(session, "set_budget", amount_usd=amount)
                assert "an agent can only lower the budget" in message
                assert "budget of 5 (set by the administrator)" in message
            assert "at most 1000000" in await refusal(session, "set_budget", amount_usd=1e9)
            answer = await call(session, "set_budget", amount_usd=2)
            assert answer["budget"]["soft"]["amount_usd"] == 2.0
            assert answer["budget"]["binding"] == "soft"
            # nor raise its own (the user's) budget, nor remove it, nor touch the hard one
            message = await refusal(session, "set_budget", amount_usd="3")
            assert "not below the budget of 2" in message
            for forged in (
                {"amount_usd": None},
                {"amount_usd": 1, "kind": "hard"},
                {"amount_usd": 1, "scope": "month"},
                {"amount_usd": 1, "session_id": "someone-else"},
                {"amount_usd": "NaN"},
                {"amount_usd": "-1"},
                {"amount_usd": "1e999999999"},
            ):
                await refusal(session, "set_budget", **forged)
        state = await budget(jp_fetch)
        assert state["hard"]["amount_usd"] == HARD_USD
        assert state["soft"]["amount_usd"] == 2.0
        assert state["soft"]["scope"] == "session"

    async def test_stop_when_done_waits_for_idle_kernels(
        self, jp_fetch: Any, jp_http_port: int, jp_base_url: str, jp_serverapp: Any
    ) -> None:
        km = jp_serverapp.kernel_manager
        async with kernel_client(km) as (kid, client):
            client.execute("import time; time.sleep(3)")

            async def busy() -> bool:
                return bool(km.get_kernel(kid).execution_state == "busy")

            await wait_for(busy, 20, "the kernel to be busy")
            async with agent(jp_http_port, jp_base_url, jp_serverapp) as session:
                answer = await call(session, "stop_when_done", action="interrupt")
                assert "action must be one of" in await refusal(
                    session, "stop_when_done", action="nuke"
                )
            assert answer["budget"]["stop_when_idle"] == {"action": "interrupt"}

            async def counting_down() -> bool:
                return (await budget(jp_fetch))["state"] == "grace"

            await wait_for(counting_down, 30, "the countdown once the kernel is done")
            grace = (await budget(jp_fetch))["grace"]
            assert (grace["reason"], grace["action"]) == ("done", "interrupt")
            await jp_fetch("gpucost", "api", "budget", "stop", method="DELETE")


async def test_without_a_token_the_endpoint_answers_403(
    jp_http_port: int, jp_base_url: str, jp_serverapp: Any
) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    url = mcp_url(jp_http_port, jp_base_url)
    async with httpx2.AsyncClient(timeout=30) as http:
        for auth in ({}, {"Authorization": "token not-the-token"}):
            response = await http.post(url, json=initialize, headers={**headers, **auth})
            assert response.status_code == 403, response.text
            assert "tools" not in response.text
    # the SDK's client cannot even initialize: the 403 is its error
    refused: BaseException | None = None
    try:
        async with agent(jp_http_port, jp_base_url, jp_serverapp, token="not-the-token"):
            pass
    except BaseException as e:  # the client's error, in a group of its task groups
        refused = e
    leaves = []
    while isinstance(refused, BaseExceptionGroup):
        leaves.extend(refused.exceptions[1:])
        refused = refused.exceptions[0]
    assert isinstance(refused, MCPError), (refused, leaves)
    assert "error response" in str(refused)


class TestEstimate:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path) -> dict[str, object]:
        return config(tmp_path)

    async def test_the_estimate_is_within_1_percent_of_the_measured_cell(
        self, jp_fetch: Any, jp_http_port: int, jp_base_url: str, jp_serverapp: Any
    ) -> None:
        async with agent(jp_http_port, jp_base_url, jp_serverapp) as session:
            before = await call(session, "estimate", duration_s=8)
            assert before["fits_budget"] is True
            assert before["budget_kind"] == "hard"
            assert (
                before["rate_usd_per_hour"]
                == 6.862
                == (await status(jp_fetch))["rate_usd_per_hour"]
            )
            assert "costs about $0.015" in before["summary"]
            async with kernel_client(jp_serverapp.kernel_manager) as (_, client):
                client.execute("%load_ext jupyter_gpucost")
                client.execute("%%gpucost\nimport time\ntime.sleep(8)")

                async def measured() -> bool:
                    cells = json.loads((await jp_fetch("gpucost", "api", "cells")).body)
                    return bool(cells["cells"])

                await wait_for(measured, 60, "the measured cell's record")
            (cell,) = json.loads((await jp_fetch("gpucost", "api", "cells")).body)["cells"]
            assert cell["cost_usd"] == pytest.approx(before["cost_usd"], rel=0.01)
            like = await call(session, "estimate", cell_id=cell["cell_id"])
            assert like["cost_usd"] == pytest.approx(cell["cost_usd"], rel=0.01)
            assert like["based_on_cell"]["wall_s"] == cell["wall_s"]
            assert like["based_on_cell"]["cost"] == cell["cost_usd"]
            assert like["cost"] == like["cost_usd"]
            assert like["budget_remaining"] == like["budget_remaining_usd"] > 0
            assert_twins(
                like,
                "$.cost_usd",
                "$.rate_usd_per_hour",
                "$.budget_remaining_usd",
                "$.based_on_cell.cost_usd",
                "$.based_on_cell.rate_usd_per_hour",
            )
            # a run longer than the budget allows does not fit
            long = await call(session, "estimate", duration_s=4 * 3600)
            assert long["fits_budget"] is False
            assert long["cost_usd"] == pytest.approx(4 * 6.862)
            for wrong in ({}, {"duration_s": -1}, {"duration_s": "NaN"}, {"cell_id": "none"}):
                assert await refusal(session, "estimate", **wrong)


class TestANonBrowserClientIsStoppedByTheBudget:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path) -> dict[str, object]:
        return config(tmp_path, budget_grace_s=5, budget_save_timeout_s=1, budget_action="shutdown")

    async def test_a_cell_run_over_the_kernel_websocket_is_stopped_at_the_agent_s_budget(
        self,
        jp_fetch: Any,
        jp_ws_fetch: Any,
        jp_http_port: int,
        jp_base_url: str,
        jp_serverapp: Any,
    ) -> None:
        kernel = json.loads((await jp_fetch("api", "kernels", method="POST", body="{}")).body)
        spent = (await status(jp_fetch))["cost_usd"]
        limit = round(spent + 0.02, 6)  # about 10 s more at $6.862/h
        async with agent(jp_http_port, jp_base_url, jp_serverapp) as session:
            await call(session, "set_budget", amount_usd=limit)
        # the way jupyter-mcp-server and other clients run a cell: the kernel's websocket
        ws = await jp_ws_fetch("api", "kernels", kernel["id"], "channels")
        message = Session().msg(
            "execute_request",
            {"code": "import time\ntime.sleep(600)", "silent": False, "store_history": True},
        )
        message["channel"] = "shell"
        message["header"]["msg_id"] = uuid.uuid4().hex
        for key in ("header", "parent_header"):
            message[key] = {k: str(v) for k, v in message[key].items()}
        await ws.write_message(json.dumps(message, default=str))
        started = time.monotonic()

        async def gone() -> bool:
            kernels = json.loads((await jp_fetch("api", "kernels")).body)
            return kernel["id"] not in [k["id"] for k in kernels]

        await wait_for(gone, 90, "the budget to shut the kernel down")
        assert time.monotonic() - started < 60
        ws.close()
        last = (await budget(jp_fetch))["last_action"]
        assert last["result"] == "done"
        assert last["kernels"] == 1
        assert last["spent_usd"] <= limit + 0.002


class TestWithoutTheMcpPackage:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
        # as on a server installed without the extra: importing the SDK fails
        monkeypatch.setitem(sys.modules, "mcp", None)
        monkeypatch.setitem(sys.modules, "jupyter_gpucost.server.agents.endpoint", None)
        return config(tmp_path)

    async def test_the_endpoint_says_what_to_install_and_the_server_runs_on(
        self, jp_fetch: Any
    ) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
        message = await refused(jp_fetch("gpucost", "mcp", method="POST", body=body), 503)
        assert "pip install 'jupyter-gpucost[mcp]'" in message
        assert (await status(jp_fetch))["rate_usd_per_hour"] == 6.862


async def test_a_browser_s_cookie_alone_needs_the_xsrf_token(
    jp_http_port: int, jp_base_url: str, jp_serverapp: Any
) -> None:
    """Jupyter's rule for every POST: a login cookie without the XSRF token is refused (a
    page of another site cannot call the tools with the user's cookie)."""
    token = jp_serverapp.identity_provider.token
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    base = f"http://127.0.0.1:{jp_http_port}{jp_base_url}"
    async with httpx2.AsyncClient(timeout=30) as http:
        # a token in the URL logs the browser in: it gets the login cookie
        login = await http.get(f"{base}api/status?token={token}")
        assert login.status_code == 200
        assert any(name.startswith("username-") for name in http.cookies)
        cookie_only = await http.post(
            mcp_url(jp_http_port, jp_base_url), json=listing, headers=headers
        )
        assert cookie_only.status_code == 403, cookie_only.text
        assert "tools" not in cookie_only.text
        assert (await http.get(f"{base}api/status")).status_code == 200
