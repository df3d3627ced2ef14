"""What a refused request answers, in every area, on a real server.

The core raises one error type (``Refusal``; the budget policy its ``BudgetError``) and
the base handler turns it into the API's JSON error. Each case here is raised by a
different part of the core and must reach the client with the same status and exactly the
same JSON, ``{"message": ..., "reason": null}``, logged as one warning line (a refusal is
not a crash); anything else stays a 500.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_gpucost.core.refusal import Refusal
from jupyter_gpucost.server.budget.policy import BudgetError, HardBudgetRefused
from jupyter_gpucost.server.routes import route_table
from jupyter_gpucost.server.web import GpuCostHandler, error_status

pytestmark = pytest.mark.usefixtures("jp_serverapp")


@pytest.fixture
def gpucost_config(tmp_path: Path) -> dict[str, object]:
    return {
        "telemetry": "simulated",
        "sample_interval_s": 0.2,
        "budget_state_path": str(tmp_path / "state" / "budget.json"),
        "export_folder": str(tmp_path / "exports"),
    }


async def refusal(jp_fetch: Any, method: str, *route: str, **kwargs: Any) -> tuple[int, Any]:
    """The status and the JSON document of a refused request."""
    with pytest.raises(HTTPClientError) as e:
        await jp_fetch("gpucost", "api", *route, method=method, **kwargs)
    response = e.value.response
    assert response is not None
    assert response.headers["Content-Type"].startswith("application/json")
    return e.value.code, json.loads(response.body)


def refused_as(message: str) -> dict[str, object]:
    return {"message": message, "reason": None}


#: (method, route, request, status, message): one refusal from each part of the core
REFUSALS: list[tuple[str, tuple[str, ...], dict[str, Any], int, str]] = [
    # the body checks every route shares (inputs)
    ("PUT", ("budget",), {"body": "{not json"}, 400, "the body must be JSON"),
    ("POST", ("cells",), {"body": "[1]"}, 400, "the body must be a JSON object, not an array"),
    # a query number (inputs)
    (
        "GET",
        ("cells",),
        {"params": {"limit": "0"}},
        400,
        "limit must be a whole number from 1 to 500, not '0'",
    ),
    # history parameters (a 400 Refusal)
    (
        "GET",
        ("history",),
        {"params": {"window": "2h"}},
        400,
        "window='2h' is not one of 15m, 1h, 6h, 24h, 7d, 30d",
    ),
    # a cell record (a 400 Refusal)
    ("POST", ("cells",), {"body": json.dumps({"wall_s": 1})}, 400, "cell_id is required"),
    # the budget policy (BudgetError, HardBudgetRefused)
    (
        "PUT",
        ("budget",),
        {"body": json.dumps({"amount_usd": 0})},
        400,
        "The budget must be more than 0 (remove the budget instead)",
    ),
    (
        "PUT",
        ("budget",),
        {"body": json.dumps({"hard_usd": 1})},
        403,
        "the hard budget is set by the administrator (c.GpuCost.hard_budget_usd or "
        "GPUCOST_BUDGET_USD) and cannot be changed from JupyterLab",
    ),
    # the budget routes' state (Conflict)
    (
        "POST",
        ("budget", "stop-now"),
        {"body": "{}"},
        409,
        "there is no budget countdown to end now",
    ),
    (
        "POST",
        ("budget", "saved"),
        {"body": json.dumps({"request_id": "r1", "client": "c", "saved": [], "failed": []})},
        409,
        "no save request 'r1' is pending",
    ),
    # the export manager (Refusal: 400, 404)
    (
        "POST",
        ("exports",),
        {"body": json.dumps({"paths": []})},
        400,
        "paths must be a non-empty list of paths, not []",
    ),
    (
        "POST",
        ("exports",),
        {"body": json.dumps({"paths": ["a"], "to": "s3"})},
        400,
        "unknown field(s) to: send paths and target",
    ),
    (
        "GET",
        ("exports", "0123456789ab"),
        {},
        404,
        "there is no export '0123456789ab': export ids are 12 hexadecimal characters, "
        "as POST /gpucost/api/exports answers",
    ),
]


@pytest.mark.parametrize(
    ("method", "route", "request_kwargs", "status", "message"),
    REFUSALS,
    ids=[f"{m} {'/'.join(r)} {s}" for m, r, _, s, _ in REFUSALS],
)
async def test_a_refusal_from_the_core_reaches_the_client_as_json(
    jp_fetch: Any,
    method: str,
    route: tuple[str, ...],
    request_kwargs: dict[str, Any],
    status: int,
    message: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        code, document = await refusal(jp_fetch, method, *route, **request_kwargs)
    assert code == status
    assert document == refused_as(message)
    # logged as a refused request (status and message), never as an uncaught exception
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert any(
        r.getMessage().startswith(f"{status} {method} ") and message in r.getMessage()
        for r in caplog.records
    ), caplog.text


async def test_an_export_that_has_ended_cannot_be_cancelled(
    jp_fetch: Any, jp_root_dir: Path
) -> None:
    (jp_root_dir / "model.pt").write_bytes(b"weights")
    started = await jp_fetch(
        "gpucost", "api", "exports", method="POST", body=json.dumps({"paths": ["model.pt"]})
    )
    job_id = json.loads(started.body)["id"]
    for _ in range(200):
        job = json.loads((await jp_fetch("gpucost", "api", "exports", job_id)).body)
        if job["state"] == "done":
            break
        await asyncio.sleep(0.05)
    assert job["state"] == "done", job
    code, document = await refusal(jp_fetch, "DELETE", "exports", job_id)
    assert (code, document) == (409, refused_as(f"the export {job_id} has already ended (done)"))


@pytest.fixture
def settings(jp_serverapp: Any) -> Iterator[dict[str, Any]]:
    """The server's settings; what a test changes in them is put back."""
    saved = dict(jp_serverapp.web_app.settings)
    yield jp_serverapp.web_app.settings
    jp_serverapp.web_app.settings.clear()
    jp_serverapp.web_app.settings.update(saved)


async def test_a_part_that_is_not_running_answers_503(
    jp_fetch: Any, settings: dict[str, Any]
) -> None:
    settings["gpucost_budget"] = None
    settings["gpucost_exports"] = None
    assert await refusal(jp_fetch, "GET", "budget") == (
        503,
        refused_as("the budget is not running on this server"),
    )
    assert await refusal(jp_fetch, "GET", "exports") == (
        503,
        refused_as("checkpoint export is not running on this server"),
    )


async def test_an_error_that_is_not_a_refusal_stays_a_500(
    jp_fetch: Any, settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("a bug, not the user's request")

    monkeypatch.setattr(settings["gpucost_service"], "kernels", broken)
    code, document = await refusal(jp_fetch, "GET", "kernels")
    assert code == 500
    # jupyter_server's answer for a crash: the bug's text is not shown to the browser
    assert document == {"message": "Unhandled error", "reason": None, "traceback": ""}


def test_each_error_maps_to_its_status() -> None:
    assert error_status(Refusal("x")) == 400
    assert error_status(Refusal("x", 501)) == 501
    assert error_status(Refusal("x", HTTPStatus.NOT_FOUND)) == 404
    assert error_status(Refusal("x", HTTPStatus.CONFLICT)) == 409
    assert error_status(Refusal("x", HTTPStatus.SERVICE_UNAVAILABLE)) == 503
    assert error_status(BudgetError("x")) == 400
    assert error_status(HardBudgetRefused("x")) == 403
    assert error_status(ValueError("x")) is None
    assert error_status(KeyError("x")) is None


def test_the_route_table_has_one_handler_per_route() -> None:
    table = route_table()
    patterns = [pattern for pattern, _ in table]
    assert len(set(patterns)) == len(patterns)
    # the REST API under /gpucost/api/; beside it, only the agents' MCP endpoint
    # (docs/agents.md), at the path MCP clients are configured with
    assert [p for p in patterns if not p.startswith("/gpucost/api/")] == ["/gpucost/mcp"]
    assert all(issubclass(handler, GpuCostHandler) for _, handler in table)


async def test_refusals_are_written_in_jupyterlabs_language(jp_fetch: Any) -> None:
    from jupyter_gpucost.core import i18n

    i18n.set_language("zh_CN")  # as JupyterLab's language setting sets it
    try:
        assert await refusal(jp_fetch, "PUT", "budget", body="{not json") == (
            400,
            refused_as("请求体必须是 JSON"),
        )
        status, document = await refusal(
            jp_fetch, "PUT", "budget", body=json.dumps({"amount_usd": 0})
        )
        assert (status, document["message"]) == (400, "预算必须大于 0（如不需要，请删除预算）")  # noqa: RUF001
        status, document = await refusal(jp_fetch, "DELETE", "exports", "0123456789ab")
        assert status == 404
        assert document["message"].startswith("没有导出 '0123456789ab'")
    finally:
        i18n.set_language("en")
