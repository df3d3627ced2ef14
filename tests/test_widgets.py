"""CostTicker in a real kernel: ticking while other cells run, from the server or alone."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kernel_notebook import H100_SERVER_PRICES, displays, run_notebook, text

from jupyter_gpucost.core.protocol import ENV_LANGUAGE, ENV_PRICES

TOKEN = "k3rnel-t0ken"


def status_document(polls: int) -> dict[str, Any]:
    """A status as the server sends it, the session's cost growing a little each poll."""
    total = Decimal("1.234567") + polls * Decimal("0.001")
    return {
        "version": "0.1.0",
        "currency": "USD",
        "currency_symbol": "$",
        "session_started": "2026-01-05T09:00:00+00:00",
        "as_of": "2026-01-05T09:10:02+00:00",
        "elapsed_s": 602.0,
        "billed_s": 602.0,
        "total_usd": str(total),
        "cost_usd": float(total),
        "gpu_cost_usd": float(total),
        "rate_usd_per_hour": "6.862",
        "used_cost_usd": 0.9,
        "idle_cost_usd": 0.334567,
        "unobserved_cost_usd": 0.0,
        "billing_adjustment_usd": 0.0,
        "base_price_usd_per_hour": 0.0,
        "base_cost_usd": 0.0,
        "energy_j": 123456.789,
        "samples": 3010,
        "gpus": [],
        "telemetry": {
            "source": "simulated",
            "simulated": True,
            "available": True,
            "reason": None,
            "detail": {},
        },
        "warnings": [],
        "budget": {
            "state": "watching",
            "hard": None,
            "soft": {
                "kind": "soft",
                "locked": False,
                "scope": "session",
                "amount_usd": 5.0,
                "spent_usd": 4.1,
                "remaining_usd": 0.9,
                "share": 0.82,
                "runs_out_at": "2026-01-05T09:18:00+00:00",
                "fired_pct": [50, 80],
            },
            "binding": "soft",
            "runs_out_at": "2026-01-05T09:18:00+00:00",
            "thresholds_pct": [50, 80, 95],
            "grace_s": 60,
            "grace": None,
        },
    }


@pytest.fixture
def status_server() -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    """A tiny HTTP server answering the status route of a server mounted under /user/ada/."""
    seen: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            auth = self.headers.get("Authorization")
            seen.append((self.path, auth))
            if self.path != "/user/ada/gpucost/api/status":
                self.send_error(404)
                return
            if auth != f"token {TOKEN}":
                self.send_error(403)
                return
            body = json.dumps(status_document(len(seen))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/user/ada/", seen
    finally:
        server.shutdown()
        server.server_close()


def test_the_ticker_ticks_while_another_cell_runs() -> None:
    prices = H100_SERVER_PRICES
    nb = run_notebook(
        [
            "from jupyter_gpucost import CostTicker\nt = CostTicker(interval_s=0.5)\nt",
            "before = (t.total_usd, t.cost.value, t.updates)",
            "import time\ntime.sleep(2)",
            "print(t.total_usd > before[0], t.cost.value != before[1], t.updates - before[2] >= 3)\n"
            "print(t.rate_usd_per_hour, t.running)\n"
            "print(t.cost.value)\nprint(t.source.value)\nprint(t.budget_label.value)",
            "t.close()\nprint(t.running)",
        ],
        env={ENV_PRICES: prices},
    )
    assert displays(nb.cells[0], "application/vnd.jupyter.widget-view+json")
    lines = text(nb.cells[3]).splitlines()
    assert lines[0] == "True True True"
    assert lines[1] == "7.38 True"
    assert lines[2].startswith("<b>session $0.")
    assert lines[2].endswith("</b> · $7.38/h")
    assert lines[3] == "no server connection: this kernel since it started, at the server's prices"
    assert lines[4] == "no budget"
    assert text(nb.cells[4]).strip() == "False"


def test_without_a_server_the_ticker_says_it_uses_catalog_prices() -> None:
    nb = run_notebook(
        [
            "from jupyter_gpucost.widgets import CostTicker\nt = CostTicker(budget_usd=2)\n"
            "print(t.source.value)\nprint(t.cost.value)\nprint(t.budget_label.value, t.bar.value)\n"
            "t.stop()\nsmall = CostTicker(budget_usd=0.05)\nprint(small.budget_label.value)\n"
            "small.stop()",
        ]
    )
    # spend as the status bar writes it, a budget by its own rule: a $0.05 budget is $0.05
    assert text(nb.cells[0]).splitlines() == [
        "no server: catalog prices, this kernel since it started (no GPU here)",
        "<b>session $0.00</b> · $0.00/h",
        "$0.00 of $2.00 (yours) 0.0",
        "$0.00 of $0.05 (yours)",
    ]


def test_the_ticker_speaks_the_language_the_server_hands_the_kernel() -> None:
    nb = run_notebook(
        [
            "from jupyter_gpucost.widgets import CostTicker\nt = CostTicker(budget_usd=2)\n"
            "print(t.source.value)\nprint(t.cost.value)\nprint(t.budget_label.value)\n"
            "print(t.bar.description)\nt.stop()",
        ],
        env={ENV_LANGUAGE: "zh_CN"},
    )
    assert text(nb.cells[0]).splitlines() == [
        "没有服务器：按目录价格，此内核自启动以来（此处没有 GPU）",  # noqa: RUF001
        "<b>本次会话 $0.00</b> · $0.00/小时",
        "$0.00 / $2.00（您的预算）",  # noqa: RUF001
        "预算",
    ]


def test_the_ticker_reads_the_servers_status_with_the_kernel_token(
    status_server: tuple[str, list[tuple[str, str | None]]],
) -> None:
    url, seen = status_server
    nb = run_notebook(
        [
            "import os, time\nfrom jupyter_gpucost import CostTicker\n"
            "t = CostTicker(interval_s=0.3)\nfirst = t.total_usd\ntime.sleep(1.5)",
            "print(first, t.total_usd > first, t.rate_usd_per_hour, t.error)\n"
            "print(t.cost.value)\nprint(t.budget_label.value, t.bar.value, t.bar.bar_style)\n"
            "print(t.source.value)\nt.stop()",
            "os.environ['JUPYTER_GPUCOST_TOKEN'] = 'not-the-token'\n"
            "wrong = CostTicker()\nwrong.stop()\nprint(wrong.error)\nprint(wrong.source.value)",
        ],
        env={"JUPYTER_GPUCOST_URL": url, "JUPYTER_GPUCOST_TOKEN": TOKEN},
    )
    lines = text(nb.cells[1]).splitlines()
    assert lines[0] == "1.235567 True 6.862 None"
    assert lines[1].startswith("<b>session $1.2")
    assert lines[1].endswith("</b> · $6.86/h")
    # the budget's scope and whose it is in words, not the API's values (soft, session)
    assert lines[2] == "$4.10 of $5.00 per session (yours) 82.0 warning"
    assert lines[3] == "the jupyter-gpucost server: this session, all kernels (simulated GPUs)"
    good = [auth for path, auth in seen if auth == f"token {TOKEN}"]
    assert len(good) >= 4  # the first read, then every 0.3 s while the other cell slept
    assert all(path == "/user/ada/gpucost/api/status" for path, _ in seen)
    assert text(nb.cells[2]).splitlines() == [
        "the server refused the kernel's token (HTTP 403)",
        "jupyter-gpucost server: the server refused the kernel's token (HTTP 403)",
    ]
