"""Kernel ↔ server: a real server, real kernels that reach it with their own token."""

from __future__ import annotations

import asyncio
import json
import os
import re
from decimal import Decimal
from typing import Any

import nbformat
import pytest
from kernel_notebook import run_notebook, text
from nbclient import NotebookClient
from tornado.httpclient import HTTPClientError

from jupyter_gpucost.core.money import status_bar
from jupyter_gpucost.core.protocol import (
    ENV_PRICES,
    ENV_TOKEN,
    ENV_URL,
    decode_prices,
    read_prices_document,
)
from jupyter_gpucost.core.saved_cost import parse_cell


def kernel_headers() -> dict[str, str]:
    return {"Authorization": f"token {os.environ[ENV_TOKEN]}"}


async def run_async(cells: list[str], replies: dict[int, Any] | None = None) -> Any:
    """Run cells in a kernel that inherits this (in-process) server's environment,
    without blocking the server's event loop; each cell's execute reply into ``replies``."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    for cell in nb.cells:
        if "# raises" in cell.source:
            cell.metadata["tags"] = ["raises-exception"]

    def keep(cell: Any, cell_index: int, execute_reply: Any) -> None:
        if replies is not None:
            replies[cell_index] = execute_reply

    client = NotebookClient(nb, timeout=120, kernel_name="python3", on_cell_executed=keep)
    await client.async_execute()
    return nb


async def cells(jp_fetch: Any, **query: str) -> list[dict[str, Any]]:
    response = await jp_fetch("gpucost", "api", "cells", params=query)
    return list(json.loads(response.body)["cells"])


async def test_the_server_tells_kernels_where_it_is(jp_serverapp: Any, jp_base_url: str) -> None:
    for _ in range(50):
        if ENV_URL in os.environ:
            break
        await asyncio.sleep(0.05)
    assert os.environ[ENV_URL] == f"http://127.0.0.1:{jp_serverapp.port}{jp_base_url}"
    assert len(os.environ[ENV_TOKEN]) >= 40


async def test_auto_mode_records_every_cell_and_the_budget_magic_sets_the_budget(
    jp_fetch: Any, jp_serverapp: Any
) -> None:
    await asyncio.sleep(0.2)  # the URL is published once the server listens
    replies: dict[int, Any] = {}
    nb = await run_async(
        [
            "%load_ext jupyter_gpucost",
            "%gpucost auto on",
            "import torch, time\na = torch.randn(400, 400)\nfor _ in range(20):\n"
            "    b = a @ a\ntime.sleep(0.3)",
            "raise ValueError('boom')  # raises",
            "%gpucost budget 5",
            "%gpucost",
            "%gpucost auto off",
            "x = 1",
            "get_ipython().gpucost_auto.cells",
        ],
        replies,
    )
    assert "every cell is priced from now on, shown next to each cell" in text(nb.cells[1])
    # auto mode adds nothing to the cell: its record for the notebook file travels in the
    # cell's execute reply (the front end and our runners write it into the metadata)
    assert nb.cells[2].outputs == []
    saved = parse_cell(replies[2]["metadata"]["gpucost"])
    # a cell auto mode did not price sends none
    assert "gpucost" not in replies[7]["metadata"]
    # the amount as the status bar writes a budget (formatBudget: two decimals at least)
    assert "your budget is now $5.00 per session" in text(nb.cells[4])
    summary = text(nb.cells[5])
    assert "this session has cost $" in summary
    assert "budget: $" in summary
    # the three cells before this one
    assert "cells priced in this kernel: 3" in summary
    # auto off: the summary's cell was the last one priced
    assert text(nb.cells[8]) == "4"

    for _ in range(100):
        found = await cells(jp_fetch, limit="50")
        if len(found) >= 4:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    found = await cells(jp_fetch, limit="50")
    by_time = sorted(found, key=lambda r: r["started"])
    assert [r["mode"] for r in by_time] == ["auto"] * 4
    torch_cell, failed = by_time[0], by_time[1]
    assert torch_cell["status"] == "ok"
    assert torch_cell["wall_s"] >= 0.3
    assert torch_cell["cpu_s"] > 0
    # the server's prices: the simulated 2x A100-80GB at $6.862/h
    assert torch_cell["rate_usd_per_hour"] == pytest.approx(6.862)
    assert torch_cell["cost_usd"] == pytest.approx(torch_cell["wall_s"] * 6.862 / 3600, abs=2e-6)
    # the record saved in the notebook is the one the server was sent
    assert saved.cost_micro_usd == round(torch_cell["cost_usd"] * 1_000_000)
    assert saved.rate_usd_per_hour == Decimal("6.862")
    assert saved.simulated
    # (nbclient's kernels are not the server's: no kernel id; the browser test checks it)
    assert failed["status"] == "error"
    budget = json.loads((await jp_fetch("gpucost", "api", "budget")).body)
    assert budget["soft"]["amount_usd"] == 5


class TestPricedSession:
    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "ledger_url": "none",
        }

    async def test_a_gpucost_cell_is_recorded_at_the_servers_prices(self, jp_fetch: Any) -> None:
        await asyncio.sleep(0.2)
        await run_async(
            [
                "%load_ext jupyter_gpucost",
                "%%gpucost\nimport time\ntime.sleep(0.5)",
            ]
        )
        for _ in range(100):
            found = await cells(jp_fetch, limit="5")
            if found:
                break
            await asyncio.sleep(0.1)
        [record] = found
        assert record["mode"] == "magic"
        # the simulated 2x A100-80GB at the server's AWS prices: $6.862/h
        assert record["rate_usd_per_hour"] == pytest.approx(6.862)
        assert record["cost_usd"] == pytest.approx(record["wall_s"] * 6.862 / 3600, abs=2e-6)
        assert record["wall_s"] >= 0.5


async def test_the_kernel_token_opens_only_the_kernel_routes(
    jp_fetch: Any, http_server_client: Any, jp_base_url: str, jp_serverapp: Any
) -> None:
    await asyncio.sleep(0.2)
    headers = kernel_headers()
    status = await http_server_client.fetch(f"{jp_base_url}gpucost/api/status", headers=headers)
    assert json.loads(status.body)["cost_usd"] >= 0
    record = {
        "cell_id": "c1",
        "started": "2026-11-23T10:00:00+00:00",
        "ended": "2026-11-23T10:00:02+00:00",
        "wall_s": 2.0,
        "cost_usd": 0.0038,
    }
    posted = await http_server_client.fetch(
        f"{jp_base_url}gpucost/api/cells", method="POST", body=json.dumps(record), headers=headers
    )
    assert posted.code == 201
    # kept in the ledger, with this server's session
    service = jp_serverapp.web_app.settings["gpucost_service"]
    [kept] = service.ledger.recent_cells(5)
    assert kept["cell_id"] == "c1"
    assert kept["cost_usd"] == 0.0038
    assert kept["session_id"] == service.session_id
    # the prices in force, as the server handed them to the kernel at its start
    prices = await http_server_client.fetch(
        f"{jp_base_url}gpucost/api/kernels/prices", headers=headers
    )
    assert read_prices_document(json.loads(prices.body)) == decode_prices(os.environ[ENV_PRICES])
    for method, path, body in [
        ("GET", "gpucost/api/kernels", None),
        ("GET", "gpucost/api/budget", None),
        ("POST", "gpucost/api/exports", json.dumps({"paths": ["x.pt"]})),
        ("POST", "gpucost/api/budget/stop-now", "{}"),
        # a kernel asks to stop when its cell is done; only the user cancels
        ("DELETE", "gpucost/api/budget/stop", None),
        ("GET", "api/contents", None),
        ("GET", "api/kernels", None),
    ]:
        with pytest.raises(HTTPClientError) as e:
            await http_server_client.fetch(
                f"{jp_base_url}{path}", method=method, body=body, headers=headers
            )
        assert e.value.code == 403, (method, path)
    # the admin's budget stays out of reach
    with pytest.raises(HTTPClientError) as e:
        await http_server_client.fetch(
            f"{jp_base_url}gpucost/api/budget",
            method="PUT",
            body=json.dumps({"kind": "hard", "amount_usd": 1000}),
            headers=headers,
        )
    assert e.value.code == 403


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"started": "2026-11-23T10:00:00+00:00"}, "cell_id is required"),
        (
            {"cell_id": "c", "started": "yesterday", "ended": "2026-11-23T10:00:00+00:00"},
            "started must be an ISO 8601 time",
        ),
        (
            {
                "cell_id": "c",
                "started": "2026-11-23T10:00:00",
                "ended": "2026-11-23T10:00:00+00:00",
            },
            "started must say its time zone",
        ),
        (
            {
                "cell_id": "c",
                "started": "2026-11-23T10:00:01+00:00",
                "ended": "2026-11-23T10:00:00+00:00",
                "wall_s": 1,
                "cost_usd": 0,
            },
            "ended is before started",
        ),
        (
            {
                "cell_id": "c",
                "started": "2026-11-23T10:00:00+00:00",
                "ended": "2026-11-23T10:00:00+00:00",
                "wall_s": 1,
                "cost_usd": -1,
            },
            "cost_usd cannot be negative",
        ),
        (
            {
                "cell_id": "c",
                "started": "2026-11-23T10:00:00+00:00",
                "ended": "2026-11-23T10:00:00+00:00",
                "wall_s": 1,
                "cost_usd": 0,
                "status": "maybe",
            },
            "status must be one of ok, error, interrupted",
        ),
    ],
)
async def test_a_bad_cell_record_is_refused_with_its_reason(
    jp_fetch: Any, record: dict[str, Any], message: str
) -> None:
    with pytest.raises(HTTPClientError) as e:
        await jp_fetch("gpucost", "api", "cells", method="POST", body=json.dumps(record))
    assert e.value.code == 400
    assert message in json.loads(e.value.response.body)["message"]
    assert await cells(jp_fetch) == []


def test_without_a_server_auto_mode_adds_no_output_and_budgets_say_why_not() -> None:
    nb = run_notebook(
        [
            "%load_ext jupyter_gpucost",
            "%gpucost auto on",
            "import time\ntime.sleep(0.2)",
            "# raises\n%gpucost budget 5",
            "# raises\n%gpucost auto maybe",
            "%gpucost",
        ]
    )
    reply = text(nb.cells[1])
    assert "saved in each cell's metadata by jupyter-gpucost's runners" in reply
    assert "%gpucost shows the total (no jupyter-gpucost server" in reply
    # the priced cell shows what its code shows: nothing
    assert nb.cells[2].outputs == []
    assert "budgets are kept by the jupyter-gpucost server extension" in text(nb.cells[3])
    # the kernel's tally says what the cells cost
    assert "cells priced in this kernel: 3" in text(nb.cells[5])
    assert "usage: %gpucost auto on|off" in text(nb.cells[4])


class TestSimulatedServerInEuros:
    """A server on simulated GPUs whose currency symbol is €, and a long countdown."""

    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "ledger_url": "none",
            "currency_symbol": "€",
            "budget_grace_s": 600.0,
            "budget_action": "interrupt",
        }

    async def test_budget_amounts_are_money_and_a_spent_budget_says_what_happens(
        self, jp_fetch: Any
    ) -> None:
        await asyncio.sleep(0.5)  # the minimum charge is spent from the first sample
        nb = await run_async(
            [
                "%load_ext jupyter_gpucost",
                "%gpucost budget 1000000",
                "%gpucost budget 1234.5",
                "%gpucost",
                "%gpucost budget 0.01",
                "%gpucost budget off",
            ]
        )
        assert "your budget is now €1,000,000.00 per session; €0.1" in text(nb.cells[1])
        assert "e+0" not in text(nb.cells[1])
        assert "your budget is now €1,234.50 per session" in text(nb.cells[2])
        summary = text(nb.cells[3])
        assert "budget: €0.1" in summary
        assert "of €1,234.50 per session (yours)" in summary  # not the API's word "soft"
        assert "$" not in summary
        spent = text(nb.cells[4])
        assert "your budget is now €0.01 per session, and it is ALREADY SPENT" in spent
        assert re.search(
            r"The server has started its countdown: in (10 min 00 s|9 min 5\d s) it saves "
            r"the open notebooks and interrupts every kernel \(this one included\)",
            spent,
        )
        assert "To undo: %gpucost budget off, or a budget above €0.1" in spent
        assert "your budget is removed" in text(nb.cells[5])
        budget = json.loads((await jp_fetch("gpucost", "api", "budget")).body)
        assert budget["soft"] is None
        assert budget["grace"] is None

    async def test_every_priced_cell_is_counted_and_simulated_gpus_are_said(
        self, jp_fetch: Any
    ) -> None:
        await asyncio.sleep(0.2)
        nb = await run_async(
            [
                "%load_ext jupyter_gpucost",
                "%gpucost auto on",
                "x = 1",
                "%%gpucost -o first\nimport time\ntime.sleep(0.2)",
                "%%gpucost -o second\ny = 2",
                "z = 3",
                "%gpucost",
            ]
        )
        report = text(nb.cells[3])
        assert "GPUs (simulated): NVIDIA A100-SXM4-80GB, NVIDIA A100-SXM4-80GB: simulated" in (
            report
        )
        assert "libnvidia-ml.so" not in report
        assert "no GPU energy: the server's GPUs are simulated" in report
        assert "GPUs (simulated)" in html_of(nb.cells[3])
        summary = text(nb.cells[6])
        assert "now €6.86/h (simulated GPUs)" in summary
        assert "these GPUs are simulated by the server" in summary
        line = next(x for x in summary.splitlines() if "cells priced in this kernel" in x)
        assert "cells priced in this kernel: 4 (2 by auto mode, 2 by %%gpucost), €" in line

        # the same four cells, as the server (and so the badges and the panel) has them
        for _ in range(100):
            found = await cells(jp_fetch, limit="50")
            if len(found) >= 5:
                break
            await asyncio.sleep(0.1)
        first_four = sorted(found, key=lambda r: r["started"])[:4]
        assert [r["mode"] for r in first_four] == ["auto", "magic", "magic", "auto"]
        micro = sum(round(r["cost_usd"] * 1_000_000) for r in first_four)
        total = line.split("), ")[1].split(" in all")[0]
        assert total == status_bar(Decimal(micro) / 1_000_000, "€")


def html_of(cell: Any) -> str:
    return "\n".join(o.data.get("text/html", "") for o in cell.outputs if "data" in o)
