"""Per-cell cost in the browser: switch it on from the toolbar, run cells, read the badges."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_gpucost.core.saved_cost import MIMETYPE, parse_cell, summarise

from .conftest import open_notebook, screenshot

pytestmark = pytest.mark.browser


def code_cell(cell_id: str, source: str) -> dict[str, Any]:
    """A code cell as a notebook file holds it, not yet run."""
    return {
        "cell_type": "code",
        "id": cell_id,
        "source": source,
        "metadata": {},
        "outputs": [],
        "execution_count": None,
    }


#: a badge's amount and seconds: `$0.0012 · 3.20 s`, `< $0.0001 · < 0.01 s`
BADGE = re.compile(r"^(< \$0\.0001|\$\d+\.\d{4}) · (< 0\.01|\d+\.\d{2}) s")


def assert_money_rule(badge: str, usd_per_hour: float = 6.862) -> None:
    """A badge's amount by the one money rule: what cost less than $0.0001 reads
    `< $0.0001`, never `$0.0000` (the seconds shown are rounded: a cell of 0.05 s costs
    $0.000095 at $6.862/h, one of 0.06 s $0.000114)."""
    found = BADGE.match(badge)
    assert found, badge
    amount, seconds = found.group(1), float(found.group(2).lstrip("< "))
    assert amount != "$0.0000", badge
    if seconds * usd_per_hour / 3600 < 0.0001 - 0.005 * usd_per_hour / 3600:
        assert amount == "< $0.0001", badge
    elif seconds * usd_per_hour / 3600 >= 0.0001 + 0.005 * usd_per_hour / 3600:
        assert amount != "< $0.0001", badge


NOTEBOOK = {
    "cells": [
        code_cell(
            "matmul-cell",
            "import time, torch\na = torch.randn(300, 300)\nb = (a @ a).sum()\n"
            "time.sleep(0.6)\nprint('done')",
        ),
        code_cell("failing-cell", "raise RuntimeError('boom')"),
    ],
    "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}


def test_the_toolbar_switch_prices_every_cell_next_to_it_and_saves_it_in_the_notebook(
    lab_factory: Any, page: Any
) -> None:
    lab = lab_factory("--GpuCost.telemetry=simulated", "--GpuCost.minimum_charge_s=0")
    lab.api(
        "api/contents/train.ipynb", method="PUT", body={"type": "notebook", "content": NOTEBOOK}
    )
    cells: Any = open_notebook(page, lab, "train.ipynb")

    toggle = page.locator(".jp-gpucost-cell-toggle button, button.jp-gpucost-cell-toggle").first
    expect(toggle).to_be_visible()
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true", timeout=30_000)

    first, second = cells.nth(0), cells.nth(1)
    first.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    expect(first.locator(".jp-OutputArea-output:not(.jp-gpucost-record)")).to_contain_text(
        "done", timeout=60_000
    )
    badge = first.locator(".jp-gpucost-cell-badge")
    expect(badge).to_have_text(re.compile(r"^\$0\.\d{4} · \d+\.\d+ s$"), timeout=30_000)
    # the simulated 2x A100-80GB at $6.862/h for the cell's wall time (import torch + 0.6 s)
    cost, seconds = (float(x) for x in re.findall(r"[\d.]+", badge.inner_text()))
    assert seconds >= 0.6
    assert cost == pytest.approx(seconds * 6.862 / 3600, abs=0.0001)
    assert "(%gpucost auto)" in (badge.get_attribute("title") or "")

    page.keyboard.press("Shift+Enter")  # the failing cell (now selected)
    expect(second.locator(".jp-OutputArea-output:not(.jp-gpucost-record)")).to_contain_text(
        "boom", timeout=60_000
    )
    expect(second.locator(".jp-gpucost-cell-badge")).to_contain_text("error", timeout=30_000)
    screenshot(page, "cell-badges.png")

    # the records are the server's, for these cells of this notebook's kernel
    records = lab.api("gpucost/api/cells?limit=10")["cells"]  # type: ignore[index]
    sessions = lab.api("api/sessions")
    (session,) = [s for s in sessions if s["path"] == "train.ipynb"]  # type: ignore[union-attr]
    by_cell = {r["cell_id"]: r for r in records}
    assert by_cell["matmul-cell"]["kernel_id"] == session["kernel"]["id"]
    assert by_cell["matmul-cell"]["notebook_path"] == "train.ipynb"
    assert by_cell["matmul-cell"]["status"] == "ok"
    assert by_cell["failing-cell"]["status"] == "error"

    # the cost panel lists them among the recent cells
    page.locator("#jp-gpucost-status").click()
    recent = page.locator("#jp-gpucost-panel .jp-gpucost-panel-cells")
    expect(recent).to_contain_text("train.ipynb", timeout=30_000)
    expect(recent.locator("tr[data-status='error']")).to_have_count(1)
    # each names its cell: its place in the open notebook, its first line as the title
    expect(recent.locator("tr[data-status='error'] td").first).to_have_text("train.ipynb · cell 2")
    ok = recent.locator("tr[data-status='ok'] td").first
    expect(ok).to_have_text("train.ipynb · cell 1")
    assert ok.get_attribute("title") == "import time, torch"
    screenshot(page, "cells-in-panel.png")

    # the saved notebook holds each cell's cost in its metadata (what the server was
    # sent), and nothing of it in the outputs
    page.locator(".lm-TabBar-tab", has_text="train.ipynb").click()
    first.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+s")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=30_000)
    saved = lab.api("api/contents/train.ipynb")["content"]  # type: ignore[index]
    assert MIMETYPE not in json.dumps([c["outputs"] for c in saved["cells"]])  # type: ignore[index]
    assert "done" in json.dumps(saved)
    ran = [c for c in saved["cells"] if c["id"] in ("matmul-cell", "failing-cell")]  # type: ignore[index]
    assert len(ran) == 2
    # the notebook's summary: exactly the sum of its cells, split by GPU as a headless
    # run splits it
    records = [parse_cell(c["metadata"]["gpucost"]) for c in ran]
    total = saved["metadata"]["gpucost"]  # type: ignore[index]
    assert total["total_micro_usd"] == sum(r.cost_micro_usd for r in records)
    assert total["by_gpu_micro_usd"] == summarise(records).to_json()["by_gpu_micro_usd"]
    assert total["runner"] == "jupyterlab"
    for cell in ran:
        record = parse_cell(cell["metadata"]["gpucost"])
        assert record.cost_micro_usd == round(by_cell[cell["id"]]["cost_usd"] * 1_000_000)
        assert record.simulated

    # switched off: the next run shows no new badge
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false", timeout=30_000)


def test_gpucost_works_without_load_ext_and_its_cell_gets_a_badge(
    lab_factory: Any, page: Any
) -> None:
    lab = lab_factory("--GpuCost.telemetry=simulated", "--GpuCost.minimum_charge_s=0")
    notebook = {
        **NOTEBOOK,
        "cells": [
            code_cell("magic-cell", "%%gpucost\nimport time\ntime.sleep(0.3)"),
            code_cell("trivial-cell", "%%gpucost\n1 + 1"),
        ],
    }
    lab.api("api/contents/m.ipynb", method="PUT", body={"type": "notebook", "content": notebook})
    cell: Any = open_notebook(page, lab, "m.ipynb").first  # type: ignore[attr-defined]
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    # the report of the magic (the extension was loaded when the kernel started)
    output = cell.locator(".jp-OutputArea-output:not(.jp-gpucost-record)")
    expect(output).to_contain_text("wall time", timeout=60_000)
    expect(output).not_to_contain_text("UsageError")
    # the amounts read as money, not as LaTeX between two dollar signs
    expect(output).to_contain_text(re.compile(r"\$0\.\d{4} at \$6\.86/h"))
    expect(output.locator("mjx-container")).to_have_count(0)
    badge = cell.locator(".jp-gpucost-cell-badge")
    expect(badge).to_have_attribute("data-mode", "magic", timeout=30_000)
    assert "(%%gpucost)" in (badge.get_attribute("title") or "")
    assert_money_rule(badge.inner_text())
    # a trivial cell: its few milliseconds cost less than the smallest amount shown
    trivial: Any = page.locator(".jp-Notebook .jp-Cell").nth(1)
    page.keyboard.press("Shift+Enter")  # the trivial cell (now selected)
    trivial_badge = trivial.locator(".jp-gpucost-cell-badge")
    expect(trivial_badge).to_have_text(BADGE, timeout=30_000)
    assert_money_rule(trivial_badge.inner_text())


def test_after_a_reload_the_button_and_badges_follow_the_kernel(
    lab_factory: Any, page: Any
) -> None:
    lab = lab_factory("--GpuCost.telemetry=simulated", "--GpuCost.minimum_charge_s=0")
    notebook = {
        **NOTEBOOK,
        "cells": [
            code_cell("switch-cell", "%gpucost auto on"),
            code_cell("work-cell", "import time\ntime.sleep(0.3)\nprint('worked')"),
        ],
    }
    lab.api("api/contents/r.ipynb", method="PUT", body={"type": "notebook", "content": notebook})
    cells: Any = open_notebook(page, lab, "r.ipynb")
    cells.nth(0).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    expect(cells.nth(0).locator(".jp-OutputArea-output:not(.jp-gpucost-record)")).to_contain_text(
        "every cell is priced", timeout=60_000
    )

    # a reload keeps the kernel, which still prices every cell
    cells = open_notebook(page, lab, "r.ipynb")
    toggle = page.locator(".jp-gpucost-cell-toggle button, button.jp-gpucost-cell-toggle").first
    expect(toggle).to_have_attribute("aria-pressed", "true", timeout=30_000)

    work = cells.nth(1)
    work.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    expect(work.locator(".jp-OutputArea-output:not(.jp-gpucost-record)")).to_contain_text(
        "worked", timeout=60_000
    )
    badge = work.locator(".jp-gpucost-cell-badge")
    expect(badge).to_have_attribute("data-mode", "auto", timeout=30_000)
    records = lab.api("gpucost/api/cells?limit=5&cell_id=work-cell")["cells"]  # type: ignore[index]
    assert records
    assert records[0]["mode"] == "auto"
    # the badge shows the server's record of this run
    seconds = float(re.findall(r"([\d.]+) s", badge.inner_text())[0])
    assert seconds == pytest.approx(records[0]["wall_s"], abs=0.01)

    # switched off from the button: the kernel stops pricing, and says so after a reload
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false", timeout=30_000)
    open_notebook(page, lab, "r.ipynb")
    toggle = page.locator(".jp-gpucost-cell-toggle button, button.jp-gpucost-cell-toggle").first
    page.wait_for_timeout(2_000)
    expect(toggle).to_have_attribute("aria-pressed", "false")
