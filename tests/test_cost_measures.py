"""One meaning per number: a kernel's GPU use and the machine's cost while its cells ran,
side by side in ``GET /gpucost/api/kernels``, through a real server with a real kernel."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from nvml_stub import DRIVER_550, FakeNvml, FakeProcess, a100_80gb
from test_kernels_api import GIB, get, start_notebook, wait_for


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    nvml = FakeNvml([a100_80gb(processes=[], utilization=5)], DRIVER_550)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    return nvml


@pytest.fixture
def gpucost_config(fake_nvml: FakeNvml, tmp_path: Path) -> dict[str, object]:
    return {
        "telemetry": "nvml",
        "sample_interval_s": 0.2,
        "ledger_url": "none",
    }


def cell(cell_id: str, kernel_id: str | None, cost_usd: float, wall_s: float) -> str:
    ended = datetime.now(UTC)
    record: dict[str, object] = {
        "cell_id": cell_id,
        "started": (ended - timedelta(seconds=wall_s)).isoformat(),
        "ended": ended.isoformat(),
        "wall_s": wall_s,
        "cost_usd": cost_usd,
    }
    if kernel_id is not None:
        record["kernel_id"] = kernel_id
    return json.dumps(record)


async def test_a_kernel_shows_its_gpu_use_and_the_machine_while_its_cells_ran(
    jp_fetch: Any, jp_serverapp: Any, fake_nvml: FakeNvml
) -> None:
    kernel_id, kernel_pid = await start_notebook(jp_fetch, jp_serverapp, "train.ipynb")
    fake_nvml.gpus[0].processes = [FakeProcess(kernel_pid, 2 * GIB)]
    # the notebook's cells, priced by its kernel: the whole machine for each wall time
    for cell_id, cost, wall in (("c1", 0.0048, 2.5), ("c2", 0.0026, 1.4), ("c3", 0.0012, 0.6)):
        posted = await jp_fetch(
            "gpucost", "api", "cells", method="POST", body=cell(cell_id, kernel_id, cost, wall)
        )
        assert posted.code == 201
    # a cell of no kernel is no kernel's
    await jp_fetch("gpucost", "api", "cells", method="POST", body=cell("c4", None, 0.5, 9))

    async def listed() -> bool:
        answer = await get(jp_fetch, "kernels")
        return any(k["id"] == kernel_id for k in answer["kernels"])

    await wait_for(listed)
    answer = await get(jp_fetch, "kernels")
    (kernel,) = [k for k in answer["kernels"] if k["id"] == kernel_id]
    assert kernel["notebook_path"] == "train.ipynb"
    # the sum of the cells' costs, exact in micro-units
    assert kernel["cells"] == 3
    assert kernel["cells_cost_micro_usd"] == 8600
    assert kernel["cells_cost_usd"] == 0.0086
    # a different measure from its GPU use, which still adds up with the rows of no
    # notebook to the GPU total, exactly
    micro = answer["micro_usd"]
    assert kernel["cost_micro_usd"] != kernel["cells_cost_micro_usd"]
    used = sum(k["cost_micro_usd"] for k in answer["kernels"])
    assert used + micro["unattributed"] + micro["idle"] == micro["total"]
    # the cells the panel lists are the same cells: their costs add up to the figure
    cells = await get(jp_fetch, "cells")
    mine = [c for c in cells["cells"] if c["kernel_id"] == kernel_id]
    assert round(sum(c["cost_usd"] for c in mine), 6) == kernel["cells_cost_usd"]
