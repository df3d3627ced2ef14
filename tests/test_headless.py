"""Headless runs priced for real: nbclient, nbconvert and papermill execute real notebooks
in real kernels (simulated GPUs: a replayed trace, labelled) and the notebook comes back
with each cell's cost in its metadata, summing exactly to the notebook's total."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import nbformat
import pytest
from cloud_standins import Cloud, serve, write_dmi

from jupyter_gpucost.core.instance_prices import find_instance, load_instance_rows, whole_instance
from jupyter_gpucost.core.protocol import KERNEL_ENV
from jupyter_gpucost.core.saved_cost import (
    ENV_DMI,
    ENV_REGION,
    ENV_TELEMETRY,
    METADATA_KEY,
    MIMETYPE,
    expected_cost_micro,
    parse_cell,
)
from jupyter_gpucost.headless import execute
from jupyter_gpucost.headless.collect import SUMMARY_TAG
from jupyter_gpucost.kernel.cell import measure

BIN = Path(sys.executable).parent
#: the demo trace's two A100-80GB at the shipped catalog's on-demand price
RATE = Decimal("6.862")


@pytest.fixture
def simulated(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """No jupyter-gpucost server; the kernel reads simulated GPUs. Returns the environment
    for a subprocess."""
    for name in KERNEL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(ENV_TELEMETRY, "simulated")
    # the catalog's rows of one region (unset: the dearest region's, an upper bound)
    monkeypatch.setenv(ENV_REGION, "us-east-1")
    # the runner reads the kernel's prices in this process, from this environment: not
    # the ones an earlier test's kernel code kept
    monkeypatch.setattr(measure, "_prices", None)
    # an empty DMI folder: no metadata service is asked, whatever machine runs the tests
    monkeypatch.setenv(ENV_DMI, str(tmp_path_factory.mktemp("no-dmi")))
    # a data folder of its own: no run adds itself to this machine's ledger
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path_factory.mktemp("data")))
    return dict(os.environ)


def notebook(*sources: str) -> Any:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell(s[3:])
        if s.startswith("md:")
        else nbformat.v4.new_code_cell(s)
        for s in sources
    ]
    return nb


def saved_costs(nb: Any) -> dict[int, Any]:
    return {
        i: parse_cell(c.metadata[METADATA_KEY])
        for i, c in enumerate(nb.cells)
        if METADATA_KEY in c.get("metadata", {})
    }


def assert_sums_exactly(nb: Any) -> dict[str, Any]:
    """Each saved cell is the meter's price of its wall time, and the notebook's total is
    exactly their sum (and exactly the sum of its split by GPU model)."""
    cells = saved_costs(nb)
    summary = nb.metadata[METADATA_KEY]
    assert summary["version"] == 1
    assert summary["total_micro_usd"] == sum(c.cost_micro_usd for c in cells.values())
    assert summary["cells"] == len(cells)
    assert sum(summary["by_gpu_micro_usd"].values()) == summary["total_micro_usd"]
    assert Decimal(summary["total_usd"]) * 1_000_000 == summary["total_micro_usd"]
    for cell in cells.values():
        assert cell.rate_usd_per_hour == RATE
        assert abs(cell.cost_micro_usd - expected_cost_micro(RATE, cell.wall_s)) <= 1
        assert cell.simulated
    assert summary["simulated"] is True
    assert "A100" in summary["simulated_by"]
    # nothing of the kernel's carrier is left in the outputs
    for c in nb.cells:
        for o in c.get("outputs", []):
            assert MIMETYPE not in o.get("data", {})
    return summary


def test_nbclient_saves_every_cell_and_the_total(simulated: dict[str, str]) -> None:
    nb = notebook(
        "import time\ntime.sleep(0.3)",
        "md:a note",
        "%%gpucost\nx = sum(range(10**5))",
        "raise ValueError('boom')",
    )
    nb.cells[3].metadata["tags"] = ["raises-exception"]
    execute(nb, kernel_name="python3", timeout=60, summary_cell=True)
    cells = saved_costs(nb)
    assert sorted(cells) == [0, 2, 3]
    assert cells[0].mode == "auto"
    assert cells[0].wall_s >= 0.3
    assert cells[2].mode == "magic"
    assert cells[3].status == "error"
    # the %%gpucost report itself stays where the user sees it
    assert any("text/html" in o.get("data", {}) for o in nb.cells[2].outputs)
    summary = assert_sums_exactly(nb)
    assert summary["runner"] == "nbclient"
    assert summary["by_gpu_micro_usd"] == {"NVIDIA A100-SXM4-80GB": summary["total_micro_usd"]}
    # GitHub does not show metadata: the summary cell says it
    last = nb.cells[-1]
    assert last.cell_type == "markdown"
    assert SUMMARY_TAG in last.metadata["tags"]
    assert "over 3 priced cells" in last.source
    assert "Simulated GPUs" in last.source


def test_a_hostile_or_corrupt_record_from_elsewhere_is_ignored_never_summed(
    simulated: dict[str, str],
) -> None:
    nb = notebook("x = 1", "md:sent to you", "y = 2")
    genuine = notebook("import time\ntime.sleep(0.05)")
    execute(genuine, kernel_name="python3", timeout=60)
    sound = genuine.cells[0].metadata[METADATA_KEY]
    # a huge cost that matches no rate, on the executed cell: replaced by this run's
    nb.cells[0].metadata[METADATA_KEY] = {**sound, "cost_micro_usd": 10**12}
    # the markdown cell: not an object, and a record pretending to be from the future
    nb.cells[1].metadata[METADATA_KEY] = "$1,000,000"
    # a code cell this run does not execute: a sound record (from another run) and a
    # forged hidden output of an earlier version; neither is summed, the output is removed
    nb.cells[2].metadata["tags"] = ["skip-execution"]
    nb.cells[2].metadata[METADATA_KEY] = sound
    forged = {**sound, "cost_micro_usd": 999_999}
    nb.cells[2].outputs = [
        nbformat.v4.new_output("display_data", data={MIMETYPE: forged, "text/plain": "forged"})
    ]
    execute(nb, kernel_name="python3", timeout=60)
    summary = nb.metadata[METADATA_KEY]
    this_run = parse_cell(nb.cells[0].metadata[METADATA_KEY])
    assert summary["total_micro_usd"] == this_run.cost_micro_usd < 10**12
    assert summary["cells"] == 1
    assert METADATA_KEY not in nb.cells[1].metadata
    assert summary["ignored"] == [{"cell": 1, "cell_id": nb.cells[1].id, "reason": "not an object"}]
    # left as it was (it is sound), shown as recorded by the front end, not summed
    assert nb.cells[2].metadata[METADATA_KEY] == sound
    assert nb.cells[2].outputs == []


@pytest.mark.parametrize("version", [None, 2, True, "1"])
def test_records_of_another_version_are_refused(version: object) -> None:
    from jupyter_gpucost.core.saved_cost import Refused

    with pytest.raises(Refused):
        parse_cell({"version": version})


def write(tmp_path: Path, nb: Any, name: str = "in.ipynb") -> Path:
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def test_nbconvert_runs_the_notebook_priced_and_saves_the_costs(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    # PriceCells is nbconvert's own ExecutePreprocessor with the collector's hooks
    path = write(tmp_path, notebook("import time\ntime.sleep(0.2)", "x = 1"))
    subprocess.run(
        [
            BIN / "jupyter",
            "nbconvert",
            "--to",
            "notebook",
            "--Exporter.preprocessors=jupyter_gpucost.headless.nbconvert.PriceCells",
            "--output",
            "out.ipynb",
            path,
        ],
        check=True,
        env=simulated,
        capture_output=True,
        timeout=120,
    )
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert sorted(saved_costs(out)) == [0, 1]
    assert assert_sums_exactly(out)["runner"] == "nbconvert"


def test_nbconvert_execute_saves_what_the_notebook_priced_itself(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    # the user: --execute and %gpucost auto on; the preprocessor runs after
    path = write(
        tmp_path,
        notebook("%load_ext jupyter_gpucost\n%gpucost auto on", "import time\ntime.sleep(0.2)"),
    )
    subprocess.run(
        [
            BIN / "jupyter",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--Exporter.preprocessors=jupyter_gpucost.headless.nbconvert.PriceCells",
            "--output",
            "out.ipynb",
            path,
        ],
        check=True,
        env=simulated,
        capture_output=True,
        timeout=120,
    )
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    # the cell that switched auto mode on was not priced; the next one was
    assert sorted(saved_costs(out)) == [1]
    assert saved_costs(out)[1].wall_s >= 0.2
    assert_sums_exactly(out)


def test_papermill_engine_saves_every_cell_and_the_total(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    nb = notebook("steps = 1", "import time\ntime.sleep(0.1 * steps)")
    nb.cells[0].metadata["tags"] = ["parameters"]
    path = write(tmp_path, nb)
    subprocess.run(
        [
            BIN / "papermill",
            "--engine",
            "gpucost",
            path,
            tmp_path / "out.ipynb",
            "-p",
            "steps",
            "3",
        ],
        check=True,
        env=simulated,
        capture_output=True,
        timeout=120,
    )
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    cells = saved_costs(out)
    # papermill's injected parameters cell is priced too
    assert "injected-parameters" in out.cells[1].metadata["tags"]
    assert sorted(cells) == [0, 1, 2]
    assert cells[2].wall_s >= 0.3
    assert assert_sums_exactly(out)["runner"] == "papermill"


def test_gpucost_run_stops_at_the_budget_and_saves_the_partial_notebook(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    # a long cell at $6.862/h: a $0.006 budget lasts about 3.1 s; with a 0.5 s stop grace
    # the interrupt comes 1 s before the budget (so a kill would land at it), in cell 3
    nb = notebook("import time", "time.sleep(0.5)", "time.sleep(30)", "print('never')")
    path = write(tmp_path, nb)
    marker = tmp_path / "stopped"
    done = subprocess.run(
        [
            BIN / "jupyter",
            "gpucost",
            "run",
            path,
            "--budget",
            "0.006",
            "--stop-grace",
            "0.5",
            "--telemetry",
            "simulated",
            "--stop-instance-when-done",
            "--stop-command",
            f"touch {marker}",
        ],
        env=simulated,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    # the progress: a line per cell, with the budget's bar
    assert "cell 2/4:" in done.stderr
    assert "of the $0.0060 budget" in done.stderr
    assert "stopped at the $0.0060 budget after cell 3" in done.stderr
    # when the stop lands was said as it began, and what the run cost against the budget
    assert "gpucost: stops at $0.006 — in about 1 s at $6.86/h; the notebook saved" in (done.stderr)
    assert "gpucost: the run cost $0.00" in done.stderr
    assert "of its $0.006 budget (" in done.stderr
    # the machine is stopped after the run, through the stop-instance path
    assert marker.exists()
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    cells = saved_costs(out)
    assert sorted(cells) == [0, 1, 2]
    assert cells[2].status == "interrupted"
    # stopped well before the 30 s cell ended, close to the budget
    assert cells[2].wall_s < 5
    summary = assert_sums_exactly(out)
    # the budget holds on the run's cost as the runner meters it (from the first code it
    # sends the kernel): a cap, never past it; the interrupt came the stop grace's two
    # steps (1 s) before it, and the cell ended within the interrupt's latency; the cells'
    # records hold all of it but the runner's own set-up and the gaps between cells (the
    # metered wall time outside the cells' walls, however long a busy machine makes them)
    metered = summary["metered"]["cost_micro_usd"]
    assert 6000 - expected_cost_micro(RATE, 1.1) <= metered <= 6000
    outside_s = summary["metered"]["wall_s"] - sum(c.wall_s for c in cells.values())
    assert outside_s >= 0
    # walls are kept to the millisecond and costs to the micro-dollar: each rounds apart
    slack_s = 0.001 * (len(cells) + 1)
    gaps = expected_cost_micro(RATE, outside_s + slack_s) + len(cells) + 1
    assert metered - gaps <= summary["total_micro_usd"] <= metered
    assert summary["stopped"]["by"] == "interrupt"
    assert summary["stopped"]["cell"] == 2
    assert summary["stopped"]["cell_id"] == nb.cells[2].id
    assert "stopped at cell 3" in summary["stopped"]["note"]
    # the cell after it never ran
    assert out.cells[3].outputs == []
    assert "stopped at cell 3" in out.cells[-1].source


def test_gpucost_run_says_a_cell_failed_with_exit_code_1(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    nb = notebook("n = 1", "x = 2", "raise ValueError('boom')", "print('never')")
    nb.cells[0].metadata["tags"] = ["parameters"]
    path = write(tmp_path, nb)
    done = subprocess.run(
        [BIN / "jupyter", "gpucost", "run", path, "-p", "n", "2", "--telemetry", "simulated"],
        env=simulated,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    # papermill's parameters cell is counted: five cells in all
    assert "cell 4/5:" in done.stderr
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    # papermill marks the failure with cells of its own: find ours by their source
    by_source = {c.source: c for c in out.cells if c.cell_type == "code"}
    assert by_source["raise ValueError('boom')"].metadata["gpucost"]["status"] == "error"
    assert "gpucost" not in by_source["print('never')"].metadata
    assert len(saved_costs(out)) == 4
    assert_sums_exactly(out)
    assert "stopped" not in out.metadata[METADATA_KEY]


def test_gpucost_run_refuses_a_budget_it_cannot_enforce(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    path = write(tmp_path, notebook("print('ran')"))
    env = {**simulated, ENV_TELEMETRY: "nvml"}  # no NVIDIA driver here: no GPU, no price
    done = subprocess.run(
        [BIN / "jupyter", "gpucost", "run", path, "--budget", "5", "--telemetry", "nvml"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 4
    assert "a budget cannot be enforced" in done.stderr
    assert not (tmp_path / "in.gpucost.ipynb").exists()


@pytest.mark.parametrize("budget", ["0", "-1", "NaN", "five", "1e100"])
def test_gpucost_run_budget_must_be_a_positive_amount(budget: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [BIN / "jupyter", "gpucost", "run", "x.ipynb", "--budget", budget],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--budget must be a positive amount" in done.stderr


def test_the_saved_records_are_json(simulated: dict[str, str]) -> None:
    nb = notebook("x = 1")
    execute(nb, kernel_name="python3", timeout=60)
    # what nbformat writes: plain JSON, the cost an integer
    text = nbformat.writes(nb)
    loaded = json.loads(text)
    assert isinstance(loaded["cells"][0]["metadata"]["gpucost"]["cost_micro_usd"], int)


def test_gpucost_run_prices_the_detected_machine_as_the_server_does(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    # an EC2 p4de.24xlarge (8x A100-80GB) answers its metadata service: each (simulated)
    # A100-80GB is priced at its share of the whole instance's row, not the per-GPU row
    cloud = Cloud()
    cloud.aws_identity["instanceType"] = "p4de.24xlarge"
    standins = serve(cloud)
    standin = next(standins)
    try:
        dmi = tmp_path / "dmi"
        dmi.mkdir()
        write_dmi(dmi, "aws")
        env = {
            **simulated,
            ENV_DMI: str(dmi),
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": standin.url,
        }
        path = write(tmp_path, notebook("import time\ntime.sleep(0.1)"))
        done = subprocess.run(
            [BIN / "jupyter", "gpucost", "run", path, "--telemetry", "simulated"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        standins.close()
    assert done.returncode == 0, done.stderr
    assert any("instance-identity" in p for p in standin.paths())
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    cell = parse_cell(out.cells[0].metadata[METADATA_KEY])
    row = find_instance(
        load_instance_rows(),
        provider="aws",
        instance="p4de.24xlarge",
        market="on-demand",
        region="us-east-1",  # the stand-in's instance identity document
    )
    assert row is not None
    pricing = whole_instance(row)
    share = pricing.per_gpu.per_gpu_hour
    assert share != Decimal("3.431")  # the per-GPU row's figure
    # the two GPUs' shares and what is left of the instance's price (a micro-unit's rest)
    assert cell.rate_usd_per_hour == 2 * share + pricing.base_per_hour
    assert "aws p4de.24xlarge on-demand" in cell.priced_by
    assert "whole-instance price" in cell.priced_by
    assert cell.simulated


def test_gpucost_run_adds_the_run_to_the_ledger(simulated: dict[str, str], tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from jupyter_gpucost.server.ledger import Ledger, default_url

    # a server on this machine made its ledger in the Jupyter data folder
    data = Path(simulated["JUPYTER_DATA_DIR"])
    url = default_url(data)
    Ledger(url).close()
    path = write(tmp_path, notebook("import time\ntime.sleep(0.2)", "x = 1"))
    done = subprocess.run(
        [BIN / "jupyter", "gpucost", "run", path, "--telemetry", "simulated"],
        env=simulated,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "added to the ledger" in done.stderr
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    total = out.metadata[METADATA_KEY]["total_micro_usd"]
    # the run's cost as the runner metered it: its cells, and what no cell's record holds
    metered = out.metadata[METADATA_KEY]["metered"]["cost_micro_usd"]
    assert metered >= total > 0
    ledger = Ledger(url)
    try:
        # the panel's today and its recent cells count the headless run
        assert ledger.totals(datetime.now(UTC)).today_micro == metered
        cells = ledger.recent_cells()
        code = [c.id for c in out.cells if c.cell_type == "code"]
        assert sorted(c["cell_id"] for c in cells) == sorted(code)
        assert {c["notebook_path"] for c in cells} == {str(path)}
    finally:
        ledger.close()


def forged(wall_s: float, gpus: list[dict[str, str]], rate: str) -> dict[str, Any]:
    """A record of our type as a notebook's own code could publish it: sound on its own."""
    return {
        "version": 1,
        "cost_micro_usd": expected_cost_micro(Decimal(rate), wall_s),
        "currency": "USD",
        "wall_s": wall_s,
        "gpu_busy_s": None,
        "gpus": gpus,
        "base_usd_per_hour": "0",
        "rate_usd_per_hour": rate,
        "priced_by": "me",
        "mode": "auto",
        "status": "ok",
        "started": "2026-11-27T08:00:00+00:00",
        "at": "2026-11-27T08:00:00+00:00",
    }


def test_a_notebook_cannot_make_its_own_cost_smaller(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    a100 = {"name": "NVIDIA A100-SXM4-80GB", "usd_per_hour": "3.431"}
    # the notebook's code hands a record over with its own cell's execute reply
    put = "from jupyter_gpucost.kernel.cell.saved import install\ninstall(get_ipython()).put"
    cells = [
        "%gpucost auto off",
        # 3 s said to be 0.01 s, and a rate of nothing for the time it took
        f"import time\ntime.sleep(3)\n{put}({forged(0.01, [a100, a100], '6.862')!r})",
        f"import time\ntime.sleep(0.3)\n{put}({forged(0.3, [], '0')!r})",
    ]
    path = write(tmp_path, notebook(*cells))
    done = subprocess.run(
        [BIN / "jupyter", "gpucost", "run", path, "--telemetry", "simulated", "--ledger", "none"],
        env=simulated,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    assert saved_costs(out) == {}
    summary = out.metadata[METADATA_KEY]
    assert summary["total_micro_usd"] == 0
    reasons = {i["cell"]: i["reason"] for i in summary["ignored"]}
    assert reasons == {
        1: "its wall time is not the time the cell took to run",
        2: "its rate is not the one this run prices cells at",
    }
