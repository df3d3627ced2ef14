"""Every route against malformed input, on a real server: a 4xx with a message, no change.

For each route and method: bodies that are not JSON or not an object, fields that are
missing or of the wrong type, amounts that are negative, zero, huge, NaN or infinite,
unknown scopes, malformed query parameters and ids, over-long and non-ASCII text. A
refusal must be a 4xx (never 500) with a JSON ``message`` that names the field, short
enough to read, and must leave the budget, the cell records and the export jobs as they
were.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

pytestmark = pytest.mark.usefixtures("jp_serverapp")

#: a message quoting a long value quotes only its start
MAX_MESSAGE_CHARS = 300

CELL: dict[str, Any] = {
    "cell_id": "c1",
    "started": "2026-11-23T10:00:00+00:00",
    "ended": "2026-11-23T10:00:02+00:00",
    "wall_s": 2,
    "cost_usd": 0.004,
}

#: one valid body per body-taking route, for the shape tests
ROUTES_WITH_A_BODY: list[tuple[str, tuple[str, ...], dict[str, Any]]] = [
    ("PUT", ("budget",), {"amount_usd": 5, "scope": "session"}),
    ("POST", ("budget", "saved"), {"request_id": "r", "client": "c", "saved": [], "failed": []}),
    ("POST", ("cells",), CELL),
    ("POST", ("exports",), {"paths": ["model.pt"]}),
]


@pytest.fixture
def state_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "budget.json"


@pytest.fixture
def gpucost_config(state_path: Path, tmp_path: Path) -> dict[str, object]:
    return {
        "telemetry": "simulated",
        "sample_interval_s": 0.2,
        "budget_state_path": str(state_path),
        "export_folder": str(tmp_path / "exports"),
    }


@pytest.fixture
def model(jp_root_dir: Path) -> Path:
    path = jp_root_dir / "model.pt"
    path.write_bytes(b"weights")
    return path


async def call(
    jp_fetch: Any,
    method: str,
    route: tuple[str, ...],
    body: object = None,
    *,
    raw: bytes | str | None = None,
    params: dict[str, str] | None = None,
) -> Any:
    kwargs: dict[str, Any] = {"method": method}
    if raw is not None:
        kwargs["body"] = raw
    elif body is not None:
        kwargs["body"] = json.dumps(body)
    elif method in ("POST", "PUT"):
        kwargs["body"] = ""
    if params:
        kwargs["params"] = params
    return await jp_fetch("gpucost", "api", *route, **kwargs)


async def refused(call: Any, code: int = 400) -> str:
    """The refusal's message, after checking what a user would see."""
    with pytest.raises(HTTPClientError) as e:
        await call
    assert e.value.code == code, (e.value.code, e.value.response and e.value.response.body)
    response = e.value.response
    assert response is not None
    assert response.headers["Content-Type"].startswith("application/json")
    message = json.loads(response.body)["message"]
    assert isinstance(message, str)
    assert 0 < len(message) <= MAX_MESSAGE_CHARS, message
    return message


def stored(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


async def get(jp_fetch: Any, *route: str, **params: str) -> Any:
    return json.loads((await jp_fetch("gpucost", "api", *route, params=params)).body)


async def snapshot(jp_fetch: Any, state_path: Path) -> dict[str, Any]:
    """What a rejected request must not change."""
    budget = await get(jp_fetch, "budget")

    def amounts(b: dict[str, Any] | None) -> Any:
        return None if b is None else (b["kind"], b["amount_usd"], b["scope"])

    return {
        "soft": amounts(budget["soft"]),
        "hard": amounts(budget["hard"]),
        "last_action": budget["last_action"],
        "save_request": budget["save_request"],
        "state_file": stored(state_path),
        "cells": (await get(jp_fetch, "cells"))["cells"],
        "jobs": (await get(jp_fetch, "exports"))["jobs"],
    }


@contextlib.asynccontextmanager
async def unchanged(jp_fetch: Any, state_path: Path) -> AsyncIterator[None]:
    """A soft budget is set first (so a refusal that dropped it would show); after the
    block, nothing may differ from before it."""
    await call(jp_fetch, "PUT", ("budget",), {"amount_usd": 7.25, "scope": "session"})
    before = await snapshot(jp_fetch, state_path)
    assert before["soft"] == ("soft", 7.25, "session")
    yield
    assert await snapshot(jp_fetch, state_path) == before


# -- bodies that are not a JSON object, on every route that takes one ---------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{amount_usd: 5}", "the body must be JSON"),
        ("not json at all", "the body must be JSON"),
        (b"\xff\xfe{}", "the body must be JSON"),
        ('{"a": 1} trailing', "the body must be JSON"),
        ("[1, 2]", "must be a JSON object, not an array"),
        ('"text"', "must be a JSON object, not a string"),
        ("null", "must be a JSON object, not null"),
        ("42", "must be a JSON object, not a number"),
        ("true", "must be a JSON object, not a boolean"),
        # deeper than the parser's recursion limit, and merely deeper than any route needs
        ("[" * 100_000 + "]" * 100_000, "nests more than"),
        ('{"a": ' * 40 + "1" + "}" * 40, "nests more than"),
    ],
)
@pytest.mark.parametrize(("method", "route", "valid"), ROUTES_WITH_A_BODY)
@pytest.mark.usefixtures("model")
async def test_a_body_that_is_not_a_json_object_is_refused(
    jp_fetch: Any,
    state_path: Path,
    method: str,
    route: tuple[str, ...],
    valid: dict[str, Any],
    raw: str | bytes,
    message: str,
) -> None:
    async with unchanged(jp_fetch, state_path):
        assert message in await refused(call(jp_fetch, method, route, raw=raw))


@pytest.mark.parametrize(("method", "route", "valid"), ROUTES_WITH_A_BODY)
@pytest.mark.usefixtures("model")
async def test_text_that_is_not_unicode_is_refused_naming_its_field(
    jp_fetch: Any, state_path: Path, method: str, route: tuple[str, ...], valid: dict[str, Any]
) -> None:
    async with unchanged(jp_fetch, state_path):
        # JSON may spell a lone surrogate ("\ud800"), which no file, database or page holds
        field = next(k for k, v in valid.items() if isinstance(v, str | list))
        value: Any = ["\ud800"] if isinstance(valid[field], list) else "\ud800"
        raw = json.dumps({**valid, field: value})  # ensure_ascii keeps the escape as text
        message = await refused(call(jp_fetch, method, route, raw=raw))
        assert field in message
        assert "not valid Unicode" in message


# -- PUT /gpucost/api/budget ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"amount_usd": NaN}', "The budget must be a finite number"),
        ('{"amount_usd": Infinity}', "The budget must be a finite number"),
        ('{"amount_usd": -Infinity}', "The budget must be a finite number"),
        ('{"amount_usd": "NaN"}', "The budget must be a finite number"),
        ('{"amount_usd": "Infinity"}', "The budget must be a finite number"),
        ('{"amount_usd": "sNaN"}', "The budget must be a finite number"),
        ('{"amount_usd": 1e400}', "The budget must be a finite number"),
        ('{"amount_usd": -0.01}', "The budget must be more than 0"),
        ('{"amount_usd": "-0"}', "The budget must be more than 0"),
        ('{"amount_usd": 0.0000001}', "The budget has more than 6 decimals"),
        # more digits than Decimal's 28: an exact check, not a rounded one
        ('{"amount_usd": "0.10000000000000000000000000001"}', "more than 6 decimals"),
        ('{"amount_usd": 1000000.000001}', "The budget must be at most 1000000"),
        ('{"amount_usd": 1e308}', "The budget must be at most 1000000"),
        ('{"amount_usd": "1e999999999"}', "The budget must be at most 1000000"),
        ('{"amount_usd": 100000000000000000000000000000000000000}', "at most 1000000"),
        ('{"amount_usd": true}', "The budget must be a number of dollars"),
        ('{"amount_usd": []}', "The budget must be a number of dollars"),
        ('{"amount_usd": {"usd": 5}}', "The budget must be a number of dollars"),
        ('{"amount_usd": ""}', "The budget must be a number of dollars"),
        ('{"amount_usd": "5 dollars"}', "The budget must be a number of dollars"),
        ('{"amount_usd": "\\u0665"}', "The budget must be a number of dollars"),
        ('{"amount_usd": "' + "9" * 5000 + '"}', "The budget must be a number of dollars"),
        ('{"amount_usd": 5, "scope": null}', "scope must be one of session, day, month, not null"),
        ('{"amount_usd": 5, "scope": 1}', "scope must be one of session, day, month, not 1"),
        ('{"amount_usd": 5, "scope": ["day"]}', "scope must be one of session, day, month"),
        ('{"amount_usd": 5, "scope": "s\\u00e9ssion"}', "scope must be one of session, day"),
        ('{"amount_usd": 5, "scope": "' + "x" * 5000 + '"}', "(5000 characters)"),
        ('{"amount_usd": null, "scope": "fortnight"}', "scope must be one of session, day"),
        ('{"amount_usd": 5, "kind": "other"}', "kind must be 'soft'"),
        ('{"amount_usd": 5, "kind": 5}', "kind must be 'soft'"),
        ('{"amount_usd": 5, "\\u00e9t\\u00e9": 1}', "unknown field(s) \u00e9t\u00e9: send"),
        ("{}", "amount_usd is required"),
        # the amount's currency-neutral name: the same checks
        ('{"amount": NaN}', "The budget must be a finite number"),
        ('{"amount": 1e400}', "The budget must be a finite number"),
        ('{"amount": -0.01}', "The budget must be more than 0"),
        ('{"amount": 0.0000001}', "The budget has more than 6 decimals"),
        ('{"amount": 1000000.000001}', "The budget must be at most 1000000"),
        ('{"amount": true}', "The budget must be a number of dollars"),
        ('{"amount": 5, "scope": "fortnight"}', "scope must be one of session, day"),
        ('{"amount": 5, "amount_usd": "5.000001"}', "but they differ (5 and '5.000001')"),
        ('{"amount": 5, "amount_usd": null}', "but they differ (5 and null)"),
        ('{"amount": NaN, "amount_usd": 5}', "The budget must be a finite number"),
    ],
)
async def test_a_bad_budget_is_refused_and_the_budget_is_kept(
    jp_fetch: Any, state_path: Path, raw: str, message: str
) -> None:
    async with unchanged(jp_fetch, state_path):
        assert message in await refused(call(jp_fetch, "PUT", ("budget",), raw=raw))


@pytest.mark.parametrize(
    ("amount", "micro_usd"),
    [
        ("12.345678", 12_345_678),
        (0.000001, 1),
        ("1E+3", 1_000_000_000),
        (1_000_000, 1_000_000_000_000),
        (" 5.50 ", 5_500_000),
        ("5.000000000", 5_000_000),
    ],
)
async def test_an_amount_at_the_edges_is_kept_exactly(
    jp_fetch: Any, state_path: Path, amount: object, micro_usd: int
) -> None:
    body = json.loads((await call(jp_fetch, "PUT", ("budget",), {"amount_usd": amount})).body)
    assert body["soft"]["amount_usd"] == micro_usd / 1_000_000
    kept = json.loads(stored(state_path) or b"null")
    assert kept["soft"] == {"amount_micro_usd": micro_usd, "scope": "session"}


# -- GET /gpucost/api/budget, POST .../saved, POST .../stop-now, GET .../actions ---------------


@pytest.mark.parametrize(
    "query",
    ["client=" + "x" * 5000, "client=%C3%A9t%C3%A9", "client=", "colour=red&client=a&client=b"],
)
async def test_reading_the_budget_takes_any_client_name(
    jp_fetch: Any, http_server_client: Any, jp_base_url: str, jp_serverapp: Any, query: str
) -> None:
    headers = {"Authorization": f"token {jp_serverapp.identity_provider.token}"}
    response = await http_server_client.fetch(
        f"{jp_base_url}gpucost/api/budget?{query}", headers=headers
    )
    assert json.loads(response.body)["state"] == "none"


async def test_a_query_that_is_not_utf8_is_refused_with_a_message(
    http_server_client: Any, jp_base_url: str, jp_serverapp: Any
) -> None:
    headers = {"Authorization": f"token {jp_serverapp.identity_provider.token}"}
    for route in ("budget?client=%FF", "history?window=%FF", "cells?limit=%FF"):
        with pytest.raises(HTTPClientError) as e:
            await http_server_client.fetch(f"{jp_base_url}gpucost/api/{route}", headers=headers)
        assert e.value.code == 400, route
        assert e.value.response is not None
        assert "Invalid unicode" in json.loads(e.value.response.body)["message"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"client": "c"}, "request_id must be a non-empty string"),
        ({"request_id": "r"}, "client must be a non-empty string"),
        ({"request_id": 5, "client": "c"}, "request_id must be a non-empty string"),
        ({"request_id": None, "client": "c"}, "not null"),
        ({"request_id": "r", "client": ""}, "client must be a non-empty string"),
        ({"request_id": "r", "client": ["c"]}, "client must be a non-empty string"),
        ({"request_id": "r" * 65, "client": "c"}, "at most 64 characters"),
        ({"request_id": "r", "client": "c", "saved": "a.ipynb"}, "saved must be a list"),
        ({"request_id": "r", "client": "c", "failed": {"a": 1}}, "failed must be a list"),
        ({"request_id": "r", "client": "c", "saved": None}, "saved must be a list"),
        ({"request_id": "r", "client": "c", "saved": ["a.ipynb", 5]}, "saved[1] must be a"),
        ({"request_id": "r", "client": "c", "failed": [None]}, "failed[0] must be a"),
        ({"request_id": "r", "client": "c", "saved": ["x" * 5000]}, "saved[0] must be a"),
        ({"request_id": "r", "client": "c", "saved": ["a"] * 1001}, "at most 1000"),
        ({"request_id": "r", "client": "c", "notebooks": []}, "unknown field(s) notebooks"),
    ],
)
async def test_a_malformed_save_answer_is_refused_naming_the_field(
    jp_fetch: Any, state_path: Path, body: dict[str, Any], message: str
) -> None:
    async with unchanged(jp_fetch, state_path):
        assert message in await refused(call(jp_fetch, "POST", ("budget", "saved"), body))


async def test_a_save_answer_in_any_language_is_a_conflict_not_an_error(
    jp_fetch: Any,
) -> None:
    body = {"request_id": "demande-é", "client": "页面", "saved": ["données/é.ipynb"]}
    message = await refused(call(jp_fetch, "POST", ("budget", "saved"), body), 409)
    assert "no save request 'demande-é' is pending" in message


@pytest.mark.parametrize("raw", ["", "garbage", "[]", '{"now": true}', "[" * 100_000])
async def test_stop_now_reads_no_body_and_without_a_countdown_is_a_conflict(
    jp_fetch: Any, state_path: Path, raw: str
) -> None:
    async with unchanged(jp_fetch, state_path):
        message = await refused(call(jp_fetch, "POST", ("budget", "stop-now"), raw=raw), 409)
        assert "no budget countdown" in message


@pytest.mark.parametrize(
    ("route", "params"),
    [
        (("budget", "actions"), {"limit": "-1", "since": "\u00e9"}),
        (("status",), {"window": "x" * 5000}),
        (("kernels",), {"id": "not-a-kernel"}),
    ],
)
async def test_routes_without_parameters_ignore_unknown_ones(
    jp_fetch: Any, route: tuple[str, ...], params: dict[str, str]
) -> None:
    plain = await get(jp_fetch, *route)
    with_junk = await get(jp_fetch, *route, **params)
    assert set(with_junk) == set(plain)


# -- GET /gpucost/api/history -------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"window": "1H"}, "window='1H' is not one of 15m, 1h"),
        ({"window": "-1h"}, "window='-1h' is not one of"),
        ({"window": "0s"}, "window='0s' is not one of"),
        ({"window": "NaN"}, "window='NaN' is not one of"),
        ({"window": "Infinity"}, "window='Infinity' is not one of"),
        ({"window": "\uff11h"}, "is not one of 15m, 1h"),  # a full-width digit
        ({"window": "1h; drop table"}, "is not one of"),
        ({"window": "x" * 5000}, "(5000 characters) is not one of"),
        ({"step": "0s"}, "step='0s' is not one of 1s, 5s"),
        ({"step": "-5s"}, "step='-5s' is not one of"),
        ({"step": "1e3s"}, "step='1e3s' is not one of"),
        ({"step": "5 s"}, "step='5 s' is not one of"),
        ({"step": "\u00e9"}, "step='\u00e9' is not one of"),
        ({"window": "1h", "step": "y" * 5000}, "(5000 characters) is not one of"),
    ],
)
async def test_a_malformed_history_parameter_is_refused_naming_it(
    jp_fetch: Any, params: dict[str, str], message: str
) -> None:
    answer = await refused(jp_fetch("gpucost", "api", "history", params=params))
    assert message in answer


async def test_history_ignores_unknown_parameters(jp_fetch: Any) -> None:
    body = await get(jp_fetch, "history", window="15m", colour="red", limit="-1")
    assert body["window_s"] == 900


# -- GET /gpucost/api/cells ---------------------------------------------------------------


@pytest.mark.parametrize(
    "limit",
    ["0", "-1", "501", "abc", "1.5", "1e2", "NaN", "Infinity", "", "\u0665", "1_0", "9" * 5000],
)
async def test_a_malformed_cell_limit_is_refused_naming_it(jp_fetch: Any, limit: str) -> None:
    message = await refused(jp_fetch("gpucost", "api", "cells", params={"limit": limit}))
    assert message.startswith("limit must be a whole number from 1 to 500, not ")


async def test_cell_limits_at_the_edges_are_accepted(jp_fetch: Any) -> None:
    for n in range(3):
        await call(jp_fetch, "POST", ("cells",), {**CELL, "cell_id": f"c{n}"})
    assert [c["cell_id"] for c in (await get(jp_fetch, "cells", limit="1"))["cells"]] == ["c2"]
    assert len((await get(jp_fetch, "cells", limit="500"))["cells"]) == 3
    assert (await get(jp_fetch, "cells", cell_id="\u00e9" * 300))["cells"] == []
    assert (await get(jp_fetch, "cells", notebook="x" * 5000))["cells"] == []


# -- POST /gpucost/api/cells --------------------------------------------------------------


def cell(**changes: Any) -> dict[str, Any]:
    record = {**CELL, **changes}
    return {k: v for k, v in record.items() if v is not ...}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (json.dumps(cell(wall_s=...)), "wall_s is required"),
        (json.dumps(cell(cost_usd=...)), "cost_usd is required"),
        (json.dumps(cell(ended=...)), "ended is required"),
        (json.dumps(cell(wall_s="2")), "wall_s must be a finite number, not a string"),
        (json.dumps(cell(wall_s=True)), "wall_s must be a finite number, not a boolean"),
        (json.dumps(cell(wall_s=[2])), "wall_s must be a finite number, not an array"),
        (json.dumps(cell(wall_s=-0.5)), "wall_s cannot be negative"),
        (json.dumps(cell(wall_s=10**400)), "wall_s must be a finite number"),
        (json.dumps(cell(cost_usd=10**400)), "cost_usd must be a finite number"),
        (json.dumps(cell(cost_usd=1e7)), "cost_usd must be at most 1e+06"),
        (json.dumps(cell(wall_s=1e12)), "wall_s must be at most"),
        (json.dumps(cell(cpu_s="fast")), "cpu_s must be a finite number"),
        (json.dumps(cell(rate_usd_per_hour=-1)), "rate_usd_per_hour cannot be negative"),
        (json.dumps(cell(energy_j=1e300)), "energy_j must be at most"),
        (json.dumps(cell(peak_memory_bytes=1e300)), "peak_memory_bytes must be at most"),
        (json.dumps(cell(peak_memory_bytes=-1)), "peak_memory_bytes cannot be negative"),
        (json.dumps(cell(peak_memory_bytes="80GB")), "peak_memory_bytes must be a finite"),
        (json.dumps(cell(gpu_busy_s=[1.0])), "gpu_busy_s must be an object"),
        (json.dumps(cell(gpu_busy_s={"gpu0": 1.0})), "gpu_busy_s keys are GPU indices"),
        (json.dumps(cell(gpu_busy_s={"\u00b2": 1.0})), "gpu_busy_s keys are GPU indices"),
        (json.dumps(cell(gpu_busy_s={"0": "1"})), "gpu_busy_s[0] must be a finite number"),
        (json.dumps(cell(gpu_busy_s={"0": -1})), "gpu_busy_s[0] cannot be negative"),
        (json.dumps(cell(gpu_busy_s={str(n): 1 for n in range(65)})), "at most 64 GPUs"),
        (json.dumps(cell(gpu_busy_by="events")), "gpu_busy_by must be one of profiler"),
        (json.dumps(cell(gpu_span_s={"0": -2})), "gpu_span_s[0] cannot be negative"),
        (
            json.dumps(cell(peak_memory_bytes_by_gpu={"0": 2**60})),
            "peak_memory_bytes_by_gpu[0] must be at most",
        ),
        (json.dumps(cell(cell_id=5)), "cell_id must be a string, not a number"),
        (json.dumps(cell(cell_id="c" * 201)), "cell_id must be a string of at most 200"),
        (json.dumps(cell(cell_id="a\u0000b")), "cell_id must be text without control"),
        (json.dumps(cell(notebook_path="/nb\u0000.ipynb")), "notebook_path must be text"),
        (json.dumps(cell(notebook_path="n" * 1025)), "notebook_path must be a string of at"),
        (json.dumps(cell(kernel_id="k" * 65)), "kernel_id must be a string of at most 64"),
        (json.dumps(cell(started=1700000000)), "started must be a string, not a number"),
        (json.dumps(cell(ended="2026-13-40T99:00:00+00:00")), "ended must be an ISO 8601"),
        # implausible times: a clock gone wrong, or a client's mistake
        (
            json.dumps(cell(started="0001-01-01T00:00:00+00:00")),
            "started must be a time between 2000-01-01 and a day from now",
        ),
        (
            json.dumps(cell(ended="9999-12-31T23:59:59+00:00")),
            "ended must be a time between 2000-01-01 and a day from now",
        ),
        (
            json.dumps(cell(ended="9999-12-31T23:59:59-14:00")),
            "ended must be a time between 2000-01-01",
        ),
        (json.dumps(cell(status=["ok"])), "status must be one of ok, error, interrupted"),
        (json.dumps(cell(mode="manual")), "mode must be one of auto, magic, not 'manual'"),
        (json.dumps(cell(mode=None)), "mode must be one of auto, magic, not null"),
        (
            '{"cell_id": "c", "started": "2026-11-23T10:00:00+00:00", '
            '"ended": "2026-11-23T10:00:01+00:00", "wall_s": NaN, "cost_usd": 0}',
            "wall_s must be a finite number",
        ),
        (
            '{"cell_id": "c", "started": "2026-11-23T10:00:00+00:00", '
            '"ended": "2026-11-23T10:00:01+00:00", "wall_s": 1, "cost_usd": Infinity}',
            "cost_usd must be a finite number",
        ),
    ],
)
async def test_a_malformed_cell_record_is_refused_and_not_kept(
    jp_fetch: Any, state_path: Path, raw: str, message: str
) -> None:
    async with unchanged(jp_fetch, state_path):
        assert message in await refused(call(jp_fetch, "POST", ("cells",), raw=raw))


async def test_a_cell_record_in_any_language_is_kept_as_sent(jp_fetch: Any) -> None:
    record = cell(
        cell_id="ячейка-1",
        notebook_path="données/entraînement 模型.ipynb",
        gpu_busy_s={"0": 1.5, "1": 0.25},
        gpu_busy_by="profiler",
        gpu_span_s={"0": 2.0, "1": 2.0},
        peak_memory_bytes=2**40,
        status="interrupted",
        mode="magic",
    )
    answer = await call(jp_fetch, "POST", ("cells",), record)
    assert answer.code == 201
    [kept] = (await get(jp_fetch, "cells", cell_id="ячейка-1"))["cells"]
    assert kept["notebook_path"] == "données/entraînement 模型.ipynb"
    assert kept["gpu_busy_s"] == {"0": 1.5, "1": 0.25}
    assert kept["gpu_busy_by"] == "profiler"
    assert kept["gpu_span_s"] == {"0": 2.0, "1": 2.0}
    assert kept["peak_memory_bytes"] == 2**40
    assert (await get(jp_fetch, "cells", notebook="données/entraînement 模型.ipynb"))["cells"]


# -- POST /gpucost/api/exports ------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({}, 400, "paths must be a non-empty list of paths, not null"),
        ({"paths": None}, 400, "paths must be a non-empty list"),
        ({"paths": {"model.pt": True}}, 400, "paths must be a non-empty list"),
        ({"paths": 5}, 400, "paths must be a non-empty list"),
        ({"paths": ["model.pt", 5]}, 400, "paths[1] must be a non-empty string, not 5"),
        ({"paths": [None]}, 400, "paths[0] must be a non-empty string, not null"),
        ({"paths": [["model.pt"]]}, 400, "paths[0] must be a non-empty string"),
        ({"paths": ["   "]}, 400, "paths[0] must be a non-empty string"),
        ({"paths": ["m" * 5000]}, 400, "paths[0] is not a path (at most 4096 characters"),
        ({"paths": ["model\u0000.pt"]}, 400, "paths[0] is not a path"),
        ({"paths": ["model.pt"] * 1001}, 400, "at most 1000 paths"),
        ({"paths": ["model.pt", "./model.pt"]}, 400, "two paths have the name 'model.pt'"),
        ({"paths": ["mod\u00e8le-absent.pt"]}, 404, "'mod\u00e8le-absent.pt' does not exist"),
        (
            {"paths": ["model.pt"], "target": 5},
            400,
            "target must be the name of a configured target, not a number",
        ),
        ({"paths": ["model.pt"], "target": ["local"]}, 400, "target must be the name"),
        ({"paths": ["model.pt"], "target": {"url": "x"}}, 400, "target must be the name"),
        (
            {"paths": ["model.pt"], "target": "\u00e9t\u00e9"},
            400,
            "no export target '\u00e9t\u00e9'",
        ),
        ({"paths": ["model.pt"], "target": "t" * 5000}, 400, "(5000 characters)"),
        ({"paths": ["model.pt"], "cible": "local"}, 400, "unknown field(s) cible"),
    ],
)
@pytest.mark.usefixtures("model")
async def test_a_malformed_export_is_refused_and_no_job_is_made(
    jp_fetch: Any, state_path: Path, body: dict[str, Any], code: int, message: str
) -> None:
    async with unchanged(jp_fetch, state_path):
        assert message in await refused(call(jp_fetch, "POST", ("exports",), body), code)


async def test_a_file_with_a_non_ascii_name_is_exported(
    jp_fetch: Any, jp_root_dir: Path, tmp_path: Path
) -> None:
    (jp_root_dir / "modèle 模型.pt").write_bytes(b"weights")
    answer = await call(jp_fetch, "POST", ("exports",), {"paths": ["modèle 模型.pt"]})
    assert answer.code == 202
    job = json.loads(answer.body)
    for _ in range(200):
        job = await get(jp_fetch, "exports", job["id"])
        if job["state"] in ("done", "failed", "cancelled"):
            break
        await asyncio.sleep(0.05)
    assert job["state"] == "done", job
    assert stored(tmp_path / "exports" / "modèle 模型.pt") == b"weights"


# -- GET and DELETE /gpucost/api/exports/<id> ----------------------------------------------


@pytest.mark.parametrize(
    "job_id",
    ["0123456789ab", "0123456789AB", "nothexnothex", "xyz", "0" * 300, "%C3%A9t%C3%A9", "-1"],
)
@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_an_unknown_or_malformed_export_id_is_a_json_404(
    jp_fetch: Any,
    state_path: Path,
    http_server_client: Any,
    jp_base_url: str,
    jp_serverapp: Any,
    method: str,
    job_id: str,
) -> None:
    async with unchanged(jp_fetch, state_path):
        headers = {"Authorization": f"token {jp_serverapp.identity_provider.token}"}
        with pytest.raises(HTTPClientError) as e:
            await http_server_client.fetch(
                f"{jp_base_url}gpucost/api/exports/{job_id}", method=method, headers=headers
            )
        assert e.value.code == 404
        assert e.value.response is not None
        assert e.value.response.headers["Content-Type"].startswith("application/json")
        message = json.loads(e.value.response.body)["message"]
        assert message.startswith("there is no export ")
        assert "12 hexadecimal characters" in message
        assert len(message) <= MAX_MESSAGE_CHARS


# -- methods a route does not have; /metrics ----------------------------------------------


@pytest.mark.parametrize(
    ("route", "methods"),
    [
        ("status", ("POST", "PUT", "DELETE")),
        ("kernels", ("POST", "PUT", "DELETE")),
        ("history", ("POST", "PUT", "DELETE")),
        ("cells", ("PUT", "DELETE")),
        ("budget", ("POST", "DELETE")),
        ("budget/stop-now", ("GET", "PUT", "DELETE")),
        ("budget/saved", ("GET", "PUT", "DELETE")),
        ("budget/actions", ("POST", "PUT", "DELETE")),
        ("exports", ("PUT", "DELETE")),
        ("exports/0123456789ab", ("POST", "PUT")),
    ],
)
async def test_a_method_a_route_does_not_have_is_a_json_405(
    jp_fetch: Any, state_path: Path, route: str, methods: tuple[str, ...]
) -> None:
    async with unchanged(jp_fetch, state_path):
        for method in methods:
            body = {} if method in ("POST", "PUT") else None
            message = await refused(call(jp_fetch, method, tuple(route.split("/")), body), 405)
            assert message == "Method Not Allowed"


async def test_metrics_ignore_a_malformed_query(jp_fetch: Any) -> None:
    for params in ({"name[]": "\u00e9" * 300}, {"name[]": "gpucost_session_cost_usd"}, {"x": ""}):
        response = await jp_fetch("metrics", params=params)
        assert response.code == 200
    # the unfiltered scrape still carries the extension's metrics
    assert b"gpucost" in (await jp_fetch("metrics")).body
