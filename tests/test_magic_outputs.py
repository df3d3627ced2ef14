"""What the magics show, in any front end: VS Code and others show the first output type they
can render, so every rich output has a ``text/plain`` form; a ``%%gpucost`` cell shows its
report once (its record for the notebook travels in the execute reply, never as an output);
an auto-priced cell shows what its own code shows and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from kernel_notebook import run_notebook

from jupyter_gpucost.core.saved_cost import ENV_TELEMETRY, MIMETYPE

CELLS = [
    "%load_ext jupyter_gpucost",
    "%%gpucost\nx = sum(range(10**5))",
    "%%gpucost --ops --top 2\nimport torch\ny = torch.randn(64, 64) @ torch.randn(64, 64)",
    "%gpucost auto on",
    "%%gpucost\nz = 1",  # auto mode on: still one report, the magic's
    "print('plain')",
    "%gpucost",
    # the guard's live line, and its warning when the projection is over the budget
    "import time\nfrom jupyter_gpucost import guard\n"
    "with guard(budget_usd=1, total_steps=10**9, warmup_steps=2) as g:\n"
    "    for _ in range(4):\n"
    "        time.sleep(0.05)\n"
    "        g.step()",
]


@pytest.fixture(scope="module")
def nb() -> Any:
    return run_notebook(CELLS, {ENV_TELEMETRY: "simulated"})


def rich(nb: Any) -> list[tuple[int, dict[str, Any]]]:
    return [
        (i, o)
        for i, cell in enumerate(nb.cells)
        for o in cell.outputs
        if o.output_type in ("display_data", "execute_result", "update_display_data")
    ]


def test_every_rich_output_has_a_plain_text_form(nb: Any) -> None:
    shown = rich(nb)
    assert any("text/html" in o.data for _, o in shown)
    # the reports, %gpucost's answer and the guard's line are among them
    assert {1, 2, 4, 7} <= {i for i, _ in shown}
    for index, output in shown:
        assert "text/plain" in output.data, (index, sorted(output.data))
        assert str(output.data["text/plain"]).strip(), index
        assert MIMETYPE not in output.data


def test_a_gpucost_cell_shows_its_report_once(nb: Any) -> None:
    for index in (1, 2, 4):
        reports = [o for o in nb.cells[index].outputs if o.output_type == "display_data"]
        assert len(reports) == 1, (index, nb.cells[index].outputs)
        assert "wall time" in reports[0].data["text/plain"]
    # an auto-priced cell: only what its code printed
    assert [o.output_type for o in nb.cells[5].outputs] == ["stream"]
    assert nb.cells[5].outputs[0].text == "plain\n"
