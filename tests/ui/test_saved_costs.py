"""The cost saved in a notebook, in the browser: a notebook run headless (nbclient, simulated
GPUs) opened in JupyterLab shows each cell's recorded cost; a forged record is ignored with a
note; the Settings Editor's switch keeps costs out of the file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from playwright.sync_api import expect

from jupyter_gpucost.core.money import status_bar, to_units
from jupyter_gpucost.core.protocol import KERNEL_ENV
from jupyter_gpucost.core.saved_cost import ENV_TELEMETRY, MIMETYPE, parse_cell, summarise
from jupyter_gpucost.headless import execute
from jupyter_gpucost.headless.collect import SUMMARY_TAG
from jupyter_gpucost.headless.summary import summary_markdown

from .conftest import open_notebook, screenshot

pytestmark = pytest.mark.browser


def executed_notebook(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A notebook run headless with nbclient: the file someone sends you."""
    for name in KERNEL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(ENV_TELEMETRY, "simulated")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell("import time\ntime.sleep(0.4)\nprint('trained')"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("y = 2"),
    ]
    execute(nb, kernel_name="python3", timeout=60)
    # someone edited the file by hand: a record whose cost matches no rate
    forged = dict(nb.cells[2].metadata["gpucost"])
    forged["cost_micro_usd"] = 10**12
    nb.cells[2].metadata["gpucost"] = forged
    return nb


def test_an_executed_notebook_shows_its_recorded_costs(
    lab_factory: Any, page: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    nb = executed_notebook(monkeypatch)
    first = parse_cell(nb.cells[0].metadata["gpucost"])
    lab = lab_factory("--GpuCost.telemetry=simulated", "--GpuCost.minimum_charge_s=0")
    content = json.loads(nbformat.writes(nb))
    lab.api("api/contents/sent.ipynb", method="PUT", body={"type": "notebook", "content": content})
    cells: Any = open_notebook(page, lab, "sent.ipynb")

    badge = cells.nth(0).locator(".jp-gpucost-cell-badge")
    expect(badge).to_have_attribute("data-recorded", "true", timeout=30_000)
    expect(badge).to_contain_text("recorded")
    # the recorded cost and seconds, by the one money rule
    amount = status_bar(to_units(first.cost_micro_usd))
    expect(badge).to_have_text(re.compile(rf"^{re.escape(amount)} · {first.wall_s:.2f} s"))
    assert "not live" in (badge.get_attribute("title") or "")
    expect(cells.nth(1).locator(".jp-gpucost-cell-badge")).to_have_attribute(
        "data-recorded", "true"
    )
    # the forged record is not shown as a cost, and says so
    ignored = cells.nth(2).locator(".jp-gpucost-cell-badge")
    expect(ignored).to_have_attribute("data-status", "ignored")
    expect(ignored).not_to_contain_text("$")
    screenshot(page, "recorded-badges.png")

    # the cost panel lists them among the recent cells, as recorded (not the forged one)
    page.locator("#jp-gpucost-status").click()
    recent = page.locator("#jp-gpucost-panel .jp-gpucost-panel-cells")
    expect(recent.locator("tr[data-recorded='true']")).to_have_count(2, timeout=30_000)
    expect(recent.locator("tr[data-recorded='true'] td").first).to_contain_text("sent.ipynb · cell")
    expect(recent).to_contain_text("recorded")
    screenshot(page, "recorded-cells-in-panel.png")
    page.locator(".lm-TabBar-tab", has_text="sent.ipynb").click()

    # priced and run again here: the cell's figure is this run's, live
    toggle = page.locator(".jp-gpucost-cell-toggle button, button.jp-gpucost-cell-toggle").first
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true", timeout=30_000)
    cells.nth(1).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    live = cells.nth(1).locator(".jp-gpucost-cell-badge")
    expect(live).to_have_attribute("data-recorded", "false", timeout=60_000)


def test_the_setting_keeps_costs_out_of_the_notebook(lab_factory: Any, page: Any) -> None:
    lab = lab_factory("--GpuCost.telemetry=simulated", "--GpuCost.minimum_charge_s=0")
    lab.api(
        "lab/api/settings/jupyter-gpucost:cells",
        method="PUT",
        body={"raw": json.dumps({"saveInNotebook": False})},
    )
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell("%%gpucost\nimport time\ntime.sleep(0.2)")]
    content = json.loads(nbformat.writes(nb))
    lab.api(
        "api/contents/diffed.ipynb", method="PUT", body={"type": "notebook", "content": content}
    )
    cells: Any = open_notebook(page, lab, "diffed.ipynb")
    cell = cells.nth(0)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    expect(cell.locator(".jp-OutputArea-output:not(.jp-gpucost-record)")).to_contain_text(
        "wall time", timeout=60_000
    )
    expect(cell.locator(".jp-gpucost-cell-badge")).to_have_attribute(
        "data-mode", "magic", timeout=30_000
    )
    page.keyboard.press("Control+s")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=30_000)
    saved = lab.api("api/contents/diffed.ipynb")["content"]  # type: ignore[index]
    assert "gpucost" not in saved["cells"][0]["metadata"]  # type: ignore[index]
    assert MIMETYPE not in json.dumps(saved)
    # the report of the magic stays
    assert "wall time" in json.dumps(saved["cells"][0]["outputs"])  # type: ignore[index]


def test_the_summary_cell_renders_with_its_amounts_and_list(
    lab_factory: Any, page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's summary cell in JupyterLab's Markdown renderer (which typesets `$…$` as TeX):
    the amounts and the list are as written, nothing typeset, whatever a label holds."""
    nb = executed_notebook(monkeypatch)
    summary = summarise(parse_cell(c.metadata["gpucost"]) for c in nb.cells[:2])
    # a label with dollars and Markdown in it (an admin's override can say anything)
    hostile = "H100 $2/h *spot* [x](y)"
    summary.by_gpu_micro_usd[hostile] = 2300
    summary.total_micro_usd += 2300
    markdown = nbformat.v4.new_markdown_cell(summary_markdown(summary))
    markdown.metadata["tags"] = [SUMMARY_TAG]
    nb.cells.append(markdown)
    lab = lab_factory("--GpuCost.telemetry=simulated")
    content = json.loads(nbformat.writes(nb))
    lab.api("api/contents/run.ipynb", method="PUT", body={"type": "notebook", "content": content})
    cells: Any = open_notebook(page, lab, "run.ipynb")
    rendered = cells.nth(3).locator(".jp-RenderedMarkdown")
    expect(rendered.locator("li")).to_have_count(len(summary.by_gpu_micro_usd), timeout=30_000)
    items = rendered.locator("li").all_inner_texts()
    expected = [
        f"{name}: {status_bar(to_units(micro))}"
        for name, micro in sorted(summary.by_gpu_micro_usd.items())
    ]
    assert items == expected
    total = status_bar(to_units(summary.total_micro_usd))
    expect(rendered).to_contain_text(f"this run cost {total} over {summary.cells} priced cells")
    expect(rendered.locator("mjx-container, .MathJax, em, a")).to_have_count(0)
    screenshot(page, "summary-cell.png")
    # Notebook 7 renders Markdown the same way
    page.goto(f"{lab.url}/notebooks/run.ipynb?token={lab.token}", timeout=60_000)
    rendered = page.locator(".jp-Notebook .jp-Cell").nth(3).locator(".jp-RenderedMarkdown")
    expect(rendered.locator("li")).to_have_count(len(expected), timeout=60_000)
    assert rendered.locator("li").all_inner_texts() == expected
    expect(rendered.locator("mjx-container, .MathJax, em, a")).to_have_count(0)
    screenshot(page, "summary-cell-notebook7.png")


def test_a_notebook_an_earlier_version_saved_comes_back_clean(
    lab_factory: Any, page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Earlier versions kept each record a second time as a hidden output: opened here, the
    outputs are removed and the record stays in the cell's metadata."""
    nb = executed_notebook(monkeypatch)
    record = nb.cells[0].metadata.pop("gpucost")
    for cell in nb.cells:
        cell.outputs.append(
            nbformat.v4.new_output(
                "display_data",
                data={MIMETYPE: record, "text/plain": "gpucost: $0.00 · 0.00 s at $6.86/h"},
                metadata={MIMETYPE: {"carrier": True}},
            )
        )
    lab = lab_factory("--GpuCost.telemetry=simulated")
    content = json.loads(nbformat.writes(nb))
    lab.api("api/contents/old.ipynb", method="PUT", body={"type": "notebook", "content": content})
    cells: Any = open_notebook(page, lab, "old.ipynb")
    badge = cells.nth(0).locator(".jp-gpucost-cell-badge")
    expect(badge).to_have_attribute("data-recorded", "true", timeout=30_000)
    expect(cells.nth(0).locator(".jp-OutputArea-output")).to_have_count(1)  # 'trained'
    expect(cells.nth(1).locator(".jp-OutputArea-output")).to_have_count(0)
    page.keyboard.press("Control+s")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=30_000)
    saved = lab.api("api/contents/old.ipynb")["content"]  # type: ignore[index]
    assert MIMETYPE not in json.dumps(saved)
    assert parse_cell(saved["cells"][0]["metadata"]["gpucost"]) == parse_cell(record)  # type: ignore[index]
    assert saved["cells"][0]["outputs"][0]["text"] == "trained\n"  # type: ignore[index]


def test_records_in_other_currencies_show_in_their_own(lab_factory: Any, page: Any) -> None:
    """A notebook whose cells were priced in a yuan session and in a dollar one, opened in a
    dollar session: each recorded cost is shown in its own currency, never as dollars."""
    from datetime import UTC, datetime, timedelta
    from decimal import Decimal

    from jupyter_gpucost.core.saved_cost import SavedCell, SavedGpu, expected_cost_micro

    def record(rate: str, currency: str) -> dict[str, object]:
        started = datetime.now(UTC) - timedelta(minutes=5)
        return SavedCell(
            cost_micro_usd=expected_cost_micro(Decimal(rate), 2.0),
            wall_s=2.0,
            rate_usd_per_hour=Decimal(rate),
            gpus=(SavedGpu("NVIDIA H100 80GB HBM3", Decimal(rate)),),
            base_usd_per_hour=Decimal(0),
            priced_by="the server's prices",
            mode="auto",
            status="ok",
            started=started.isoformat(),
            at=(started + timedelta(seconds=2)).isoformat(),
            currency=currency,
        ).to_json()

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("y = 2")]
    nb.cells[0].metadata["gpucost"] = record("49.5", "CNY")
    nb.cells[1].metadata["gpucost"] = record("6.88", "USD")
    lab = lab_factory("--GpuCost.telemetry=simulated")
    content = json.loads(nbformat.writes(nb))
    lab.api("api/contents/mixed.ipynb", method="PUT", body={"type": "notebook", "content": content})
    cells: Any = open_notebook(page, lab, "mixed.ipynb")

    yuan = cells.nth(0).locator(".jp-gpucost-cell-badge")
    expect(yuan).to_have_text("CN¥0.0275 · 2.00 s · recorded", timeout=30_000)
    dollars = cells.nth(1).locator(".jp-gpucost-cell-badge")
    expect(dollars).to_have_text("$0.0038 · 2.00 s · recorded", timeout=30_000)
    screenshot(page, "recorded-badges-in-their-currencies.png")

    # the panel's recorded rows: each in its own currency too
    page.locator("#jp-gpucost-status").click()
    recent = page.locator("#jp-gpucost-panel .jp-gpucost-panel-cells")
    rows = recent.locator("tr[data-recorded='true']")
    expect(rows).to_have_count(2, timeout=30_000)
    expect(recent).to_contain_text("CN¥0.0275")
    expect(recent).to_contain_text("$0.0038")
    recent.scroll_into_view_if_needed()
    screenshot(page, "recorded-cells-in-their-currencies.png")
