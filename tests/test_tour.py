"""The tour (examples/tour.ipynb) runs top to bottom headless on a CPU, with simulated GPUs,
and comes back with its cells' costs saved and summed exactly."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from jupyter_gpucost.core.protocol import KERNEL_ENV
from jupyter_gpucost.core.saved_cost import ENV_REGION, ENV_TELEMETRY, METADATA_KEY, parse_cell
from jupyter_gpucost.headless import execute
from jupyter_gpucost.kernel.cell import measure

TOUR = Path(__file__).resolve().parent.parent / "examples" / "tour.ipynb"


def test_the_tour_runs_top_to_bottom_headless(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KERNEL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(ENV_TELEMETRY, "simulated")
    # the catalog's rows of one region (unset: the dearest region's, an upper bound)
    monkeypatch.setenv(ENV_REGION, "us-east-1")
    # the runner reads the kernel's prices afresh, from this environment
    monkeypatch.setattr(measure, "_prices", None)
    nb = nbformat.read(TOUR, as_version=4)
    # nbclient raises on the first cell that fails: the tour has none
    execute(nb, kernel_name="python3", timeout=300, cwd=str(TOUR.parent), summary_cell=True)
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = "\n".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
        for c in code
        for o in c.outputs
    )
    assert "already loaded" not in text
    # %%gpucost's report, labelled simulated; the guard stopped before the budget ran out
    assert "GPUs (simulated)" in text
    # the kernel meters itself: it says so, never "the server"
    assert "simulated by this kernel" in text
    assert "simulated by the server" not in text
    assert "one more step" in text
    assert "saving a checkpoint" in text
    costs = [parse_cell(c.metadata[METADATA_KEY]) for c in code]
    assert all(c.simulated for c in costs)
    assert {c.mode for c in costs} == {"auto", "magic"}
    summary = nb.metadata[METADATA_KEY]
    assert summary["total_micro_usd"] == sum(c.cost_micro_usd for c in costs) > 0
    assert "this run cost" in nb.cells[-1].source
