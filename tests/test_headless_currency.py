"""A headless run in a session that prices in yuan: every amount it prints, saves and adds
to the ledger is in yuan, and a record in another currency is never summed into it."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import nbformat
import pytest

from jupyter_gpucost.core.protocol import (
    ENV_PRICES,
    KERNEL_ENV,
    PricedGpu,
    PublishedPrices,
    encode_prices,
)
from jupyter_gpucost.core.saved_cost import (
    ENV_DMI,
    ENV_TELEMETRY,
    METADATA_KEY,
    expected_cost_micro,
    parse_cell,
)

BIN = Path(sys.executable).parent
#: what a server pricing one H100 in yuan (an admin's ``c.GpuCost.currency = "CNY"``)
#: hands its kernels, and so a run it starts
YUAN_RATE = Decimal("49.5")
YUAN_PRICES = PublishedPrices(
    gpus=(PricedGpu("GPU-1", "NVIDIA H100 80GB HBM3", YUAN_RATE),),
    base_per_hour=Decimal(0),
    currency_symbol="CN¥",
    source="the server's aliyun on-demand prices",
    currency="CNY",
)


@pytest.fixture
def in_yuan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a run in a yuan session (simulated GPUs, no metadata service)."""
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_ENV}
    env[ENV_TELEMETRY] = "simulated"
    env[ENV_PRICES] = encode_prices(YUAN_PRICES)
    env[ENV_DMI] = str(tmp_path_factory.mktemp("no-dmi"))
    env["JUPYTER_DATA_DIR"] = str(tmp_path_factory.mktemp("data"))
    return env


def notebook_file(tmp_path: Path, *sources: str) -> Path:
    """A Python notebook of these code cells, written as ``in.ipynb``."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    path = tmp_path / "in.ipynb"
    nbformat.write(nb, path)
    return path


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "jupyter"), "gpucost", "run", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_run_in_yuan_saves_yuan_and_says_yuan(in_yuan: dict[str, str], tmp_path: Path) -> None:
    from jupyter_gpucost.server.ledger import Ledger, default_url

    url = default_url(Path(in_yuan["JUPYTER_DATA_DIR"]))
    Ledger(url).close()
    path = notebook_file(tmp_path, "import time\ntime.sleep(0.2)", "x = 1", "y = 2")
    done = run(in_yuan, str(path), "--budget", "5", "--telemetry", "simulated")
    assert done.returncode == 0, done.stderr
    lines = done.stderr
    # every amount in yuan: the cells' lines, the budget's bar, the run's cost, the ledger
    assert "cell 1/3: CN¥" in lines
    assert "of the CN¥5.00 budget" in lines
    assert "gpucost: the run cost CN¥" in lines
    assert "of its CN¥5.00 budget" in lines
    assert "added to the ledger" in lines
    assert "$" not in lines
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    records = [parse_cell(c.metadata[METADATA_KEY]) for c in out.cells if c.cell_type == "code"]
    assert len(records) == 3
    for record in records:
        # the kernel's record names the session's currency; its amount is in it
        assert record.currency == "CNY"
        assert record.rate_usd_per_hour == YUAN_RATE
        assert abs(record.cost_micro_usd - expected_cost_micro(YUAN_RATE, record.wall_s)) <= 1
    summary = out.metadata[METADATA_KEY]
    assert summary["currency"] == "CNY"
    assert summary["total_micro_usd"] == sum(r.cost_micro_usd for r in records)
    assert summary.get("ignored") is None
    # the summary cell writes the yuan's symbol, never a dollar sign
    assert "CN¥" in out.cells[-1].source
    assert "\\$" not in out.cells[-1].source


def test_a_dollar_record_a_notebook_publishes_is_refused_in_a_yuan_run(
    in_yuan: dict[str, str], tmp_path: Path
) -> None:
    """A notebook's own code can hand over a record of our type: one in dollars (at the
    yuan figure, so a sevenfold cheaper unit) is refused with its reason, never summed."""
    wall_s = 0.3
    forged = {
        "version": 1,
        "cost_micro_usd": expected_cost_micro(YUAN_RATE, wall_s),
        "currency": "USD",
        "wall_s": wall_s,
        "gpus": [{"name": "NVIDIA H100 80GB HBM3", "usd_per_hour": str(YUAN_RATE)}],
        "base_usd_per_hour": "0",
        "rate_usd_per_hour": str(YUAN_RATE),
        "priced_by": "me",
        "mode": "auto",
        "status": "ok",
        "started": "2026-11-27T08:00:00+00:00",
        "at": "2026-11-27T08:00:00+00:00",
    }
    put = "from jupyter_gpucost.kernel.cell.saved import install\ninstall(get_ipython()).put"
    path = notebook_file(
        tmp_path, "%gpucost auto off", f"import time\ntime.sleep({wall_s})\n{put}({forged!r})"
    )
    done = run(in_yuan, str(path), "--telemetry", "simulated", "--ledger", "none")
    assert done.returncode == 0, done.stderr
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    assert all(METADATA_KEY not in c.metadata for c in out.cells)
    summary = out.metadata[METADATA_KEY]
    assert (summary["currency"], summary["total_micro_usd"]) == ("CNY", 0)
    reasons = {i["cell"]: i["reason"] for i in summary["ignored"]}
    assert reasons == {1: "its currency is not the one this run prices cells in"}


def test_the_budget_is_in_the_session_s_currency() -> None:
    done = subprocess.run(
        [str(BIN / "jupyter"), "gpucost", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "in the session's currency" in " ".join(done.stdout.split())
    assert "(USD)" not in done.stdout


def test_a_run_the_ledger_cannot_take_says_its_kept_cost_in_yuan(
    in_yuan: dict[str, str], tmp_path: Path
) -> None:
    # the ledger's folder is a file: nothing can be written there
    blocker = tmp_path / "ledgers"
    blocker.write_text("not a folder")
    path = notebook_file(tmp_path, "import time\ntime.sleep(0.3)")
    url = f"sqlite:///{blocker / 'ledger.sqlite'}"
    done = run(in_yuan, str(path), "--telemetry", "simulated", "--ledger", url)
    assert done.returncode == 6, done.stderr
    assert "gpucost: its cost (CN¥" in done.stderr
    assert "added at the next run" in done.stderr
    assert "$" not in done.stderr


def test_nbclient_in_a_yuan_session_sums_in_yuan(
    in_yuan: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runners that are told no currency (nbclient's hooks, papermill's engine,
    nbconvert) take the kernel's, read in their own process."""
    from jupyter_gpucost.headless import execute
    from jupyter_gpucost.kernel.cell import measure

    for name in KERNEL_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in in_yuan.items():
        monkeypatch.setenv(name, value)
    # the runner reads the kernel's prices from this environment, not an earlier test's
    monkeypatch.setattr(measure, "_prices", None)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    execute(nb, kernel_name="python3", timeout=60)
    record = parse_cell(nb.cells[0].metadata[METADATA_KEY])
    assert (record.currency, record.rate_usd_per_hour) == ("CNY", YUAN_RATE)
    summary = nb.metadata[METADATA_KEY]
    assert (summary["currency"], summary["total_micro_usd"]) == ("CNY", record.cost_micro_usd)


def test_a_yuan_run_with_no_record_still_sums_in_yuan(
    in_yuan: dict[str, str], tmp_path: Path
) -> None:
    """A notebook that turns pricing off leaves no record: the run's metered cost is still
    in yuan, and the summary says so."""
    path = notebook_file(tmp_path, "%gpucost auto off", "import time\ntime.sleep(0.2)")
    done = run(in_yuan, str(path), "--telemetry", "simulated", "--ledger", "none")
    assert done.returncode == 0, done.stderr
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    summary = out.metadata[METADATA_KEY]
    assert summary["cells"] == 0
    assert summary["metered"]["cost_micro_usd"] > 0
    assert summary["currency"] == "CNY"
    assert "gpucost: the run cost CN¥" in done.stderr
