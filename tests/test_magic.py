"""%%gpucost in real kernels (nbclient, CPU torch), and prices handed down by the server."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from kernel_notebook import H100_SERVER_PRICES, run_notebook, text

from jupyter_gpucost.core.protocol import ENV_LANGUAGE, ENV_PRICES


def html(cell: Any) -> str:
    return "\n".join(o.data.get("text/html", "") for o in cell.outputs if "data" in o)


def test_magic_reports_a_torch_cell_with_operators_errors_and_await() -> None:
    nb = run_notebook(
        [
            "%load_ext jupyter_gpucost",
            "%%gpucost -o light\nimport torch\nx = torch.randn(400, 400)\n"
            "for _ in range(30):\n    x = (x @ x).tanh()",
            "print(light.status, light.wall_s > 0, light.cpu_s > 0, light.cost_usd >= 0)",
            "%%gpucost --ops --top 3 -o heavy\ny = torch.randn(500, 500)\n"
            "for _ in range(10):\n    y = (y @ y).relu() / 500",
            "print([op.name for op in heavy.ops], heavy.ops_by, len(heavy.ops))",
            "%%gpucost -o waited\nimport asyncio\nawait asyncio.sleep(0.3)\nafter_await = 1",
            "print(after_await, round(waited.wall_s, 1) >= 0.3)",
            "%%gpucost -o failed\n1 / 0  # raises",
            "print(failed.status)",
            "%%gpucost -o stopped\nraise KeyboardInterrupt  # raises",
            "print(stopped.status)",
            "%%gpucost --top 0\nnever = 1  # raises",
            "print('never' in dir())",
        ]
    )
    c = nb.cells
    assert "<strong>%%gpucost</strong>" in html(c[1])
    assert "wall time" in text(c[1])
    assert text(c[2]).strip() == "ok True True True"
    ops_line = text(c[4]).strip()
    assert ops_line.startswith("['aten::mm'")
    assert ops_line.endswith("self CPU time 3")
    assert "top operators by self CPU time" in text(c[3])
    assert text(c[6]).strip() == "1 True"
    assert "ZeroDivisionError" in text(c[7])
    assert "%%gpucost (error)" in text(c[7])
    assert text(c[8]).strip() == "error"
    assert text(c[10]).strip() == "interrupted"
    # bad arguments: usage, and the body does not run
    assert "--top must be at least 1" in text(c[11])
    assert "usage: %%gpucost" in text(c[11])
    assert text(c[12]).strip() == "False"


def test_ops_is_skipped_when_the_users_profiler_runs() -> None:
    nb = run_notebook(
        [
            "%load_ext jupyter_gpucost",
            "import torch\nfrom torch.profiler import profile\nmine = profile()\nmine.__enter__()",
            "%%gpucost --ops -o r\nz = torch.ones(10) * 2",
            "mine.__exit__(None, None, None)\nprint(len(r.ops))\nprint(r.notes[0])",
        ]
    )
    assert "a profiler is already running" in text(nb.cells[2])
    count, note = text(nb.cells[3]).strip().splitlines()
    assert count == "0"
    assert note.startswith("--ops skipped: a profiler is already running in this kernel")


def test_cells_are_priced_with_the_servers_prices() -> None:
    prices = H100_SERVER_PRICES
    nb = run_notebook(
        [
            "%load_ext jupyter_gpucost",
            "%%gpucost -o r\nimport time\ntime.sleep(0.5)",
            "print(r.rate_usd_per_hour, r.price_source)\n"
            "print(r.cost_micro_usd == round(float(r.rate_usd_per_hour) * r.wall_s / 3600 * 1e6))",
            "%gpucost",
        ],
        env={ENV_PRICES: prices},
    )
    lines = text(nb.cells[2]).strip().splitlines()
    assert lines[0] == "7.38 the server's aws on-demand prices"
    assert lines[1] == "True"
    assert "NVIDIA H100 80GB HBM3 (GPU-1): $6.88/h" in text(nb.cells[3])


def test_the_kernel_writes_in_the_language_the_server_hands_it() -> None:
    cells = ["%load_ext jupyter_gpucost", "%gpucost", "%gpucost auto on", "%gpucost auto off"]
    nb = run_notebook(
        [*cells, "%%gpucost\nx = 1"], env={ENV_PRICES: H100_SERVER_PRICES, ENV_LANGUAGE: "zh_CN"}
    )
    report = html(nb.cells[4])
    for label in ("费用", "墙钟时间", "CPU 时间", "价格"):
        assert f">{label}</th>" in report
    assert "wall time" not in report
    # the rate rule (two decimals), and "per hour" in Chinese for the price too
    assert "jupyter-gpucost：单元格按 $7.38/小时 计价" in text(nb.cells[1])  # noqa: RUF001
    assert "NVIDIA H100 80GB HBM3 (GPU-1): $6.88/小时" in text(nb.cells[1])
    assert text(nb.cells[2]).startswith("gpucost：从现在起每个单元格都会计价")  # noqa: RUF001
    assert text(nb.cells[3]).strip() == "gpucost：单元格不再计价。"  # noqa: RUF001
    # an unknown language, or none: English
    nb = run_notebook(cells[:3], env={ENV_PRICES: H100_SERVER_PRICES, ENV_LANGUAGE: "xx"})
    assert "jupyter-gpucost: cells are priced at $7.38/h" in text(nb.cells[1])
    assert text(nb.cells[2]).startswith("gpucost: every cell is priced from now on")


def test_without_a_server_the_catalog_is_used_and_said() -> None:
    nb = run_notebook(
        ["%load_ext jupyter_gpucost", "%%gpucost -o r\nx = 1", "print(r.price_source)"]
    )
    assert "no jupyter-gpucost server for this kernel" in text(nb.cells[2])


async def test_the_server_hands_its_prices_to_its_kernels(jp_serverapp: Any) -> None:
    published = json.loads(os.environ[ENV_PRICES])
    assert published["source"] == "the server's aws on-demand prices"
    assert [g["usd_per_hour"] for g in published["gpus"]] == ["3.431", "3.431"]


@pytest.fixture(autouse=True)
def _no_stale_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_PRICES, raising=False)


@pytest.mark.parametrize(
    ("amount", "kwargs", "shown"),
    [
        ("2.512254", {}, "€2.51"),
        ("0.006312", {}, "€0.0063"),
        ("0.09996", {}, "€0.10"),
        ("1234567.891", {}, "€1,234,567.89"),
        ("0", {}, "€0.00"),
        ("0.00004", {}, "< €0.0001"),
        # "a budget above ...": never below what was spent
        ("2.494001", {"round_up": True}, "€2.50"),
        ("0.012301", {"round_up": True}, "€0.0124"),
    ],
)
def test_amounts_spent_read_as_the_status_bar_shows_them(
    amount: str, kwargs: dict[str, bool], shown: str
) -> None:
    from decimal import Decimal

    from jupyter_gpucost.core.money import status_bar

    assert status_bar(Decimal(amount), "€", **kwargs) == shown
