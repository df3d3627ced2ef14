"""A headless run trusts only what it can check: records with real times, at the run's rate,
a budget the runner meters itself and holds against a notebook that switches its pricing
off or swallows the interrupt, and a ledger write that is never silently lost."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st

# the headless tests' own: simulated GPUs, no server, a data folder of the test's own
# (the fixture ``simulated``, asked for by name below)
from test_headless import BIN, RATE, notebook, simulated, write  # noqa: F401

from jupyter_gpucost.core.record_rules import (
    BEFORE_THE_RUN,
    IN_THE_FUTURE,
    NO_TIME_ZONE,
    NOT_THIS_RATE,
    RecordRefused,
    TimeWindow,
    check_time,
)
from jupyter_gpucost.core.saved_cost import (
    METADATA_KEY,
    expected_cost_micro,
    parse_cell,
)
from jupyter_gpucost.headless import execute

A100 = {"name": "NVIDIA A100-SXM4-80GB", "usd_per_hour": "3.431"}
#: what a notebook's own code can do to hand a record over: the reply channel is the kernel's
HAND_OVER = (
    "from IPython import get_ipython as _g\n"
    "from jupyter_gpucost.kernel.cell.saved import install as _i\n"
)


def record(
    started: str, at: str, *, wall_s: float = 0.2, rate: str = "6.862", gpus: Any = None
) -> dict[str, Any]:
    """A record of our type as a notebook's own code could publish it (sound on its own)."""
    return {
        "version": 1,
        "cost_micro_usd": expected_cost_micro(Decimal(rate), wall_s),
        "currency": "USD",
        "wall_s": wall_s,
        "gpu_busy_s": None,
        "gpus": [A100, A100] if gpus is None else gpus,
        "base_usd_per_hour": "0",
        "rate_usd_per_hour": rate,
        "priced_by": "me",
        "mode": "auto",
        "status": "ok",
        "started": started,
        "at": at,
    }


def publishing(rec: dict[str, Any], sleep_s: float = 0.2) -> str:
    """A cell that takes ``sleep_s`` and hands ``rec`` over with its execute reply."""
    return f"import time\ntime.sleep({sleep_s})\n{HAND_OVER}_i(_g()).put({rec!r})"


def publishing_last(rec: dict[str, Any], sleep_s: float = 0.2) -> str:
    """The same, after the kernel has handed over its own record of the cell (a hook of the
    notebook's own, run once after the kernel's): the last record handed over is the one
    its reply carries."""
    return (
        f"import time\ntime.sleep({sleep_s})\n{HAND_OVER}"
        f"def _last(result, _rec={rec!r}):\n"
        "    _i(_g()).put(_rec)\n"
        "    _g().events.unregister('post_run_cell', _last)\n"
        "_g().events.register('post_run_cell', _last)"
    )


def saved_step(path: Path) -> str | None:
    """The budget's step the saved notebook names (``None``: none yet, or mid-write)."""
    try:
        stopped = json.loads(path.read_text())["metadata"]["gpucost"]["stopped"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(stopped.get("by") or "") or None


def gpucost_run(path: Path, env: dict[str, str], *extra: str, timeout: float = 120) -> Any:
    return subprocess.run(
        [BIN / "jupyter", "gpucost", "run", path, "--telemetry", "simulated", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ignored(nb: Any) -> dict[int, str]:
    return {i["cell"]: i["reason"] for i in nb.metadata[METADATA_KEY].get("ignored", [])}


# -- the rule itself -------------------------------------------------------------------

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@given(moment=st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1)))
def test_a_time_without_a_zone_is_never_accepted(moment: datetime) -> None:
    for window in (TimeWindow.plausible(NOW), TimeWindow.of_run(NOW - timedelta(hours=1), NOW)):
        with pytest.raises(RecordRefused) as refused:
            check_time(moment.isoformat(), window)
        assert refused.value.reason == NO_TIME_ZONE


@given(
    moment=st.datetimes(
        min_value=datetime(1990, 1, 1),
        max_value=datetime(2100, 1, 1),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=8)), timezone(-timedelta(hours=5))]
        ),
    )
)
def test_a_run_takes_only_times_between_its_start_and_now(moment: datetime) -> None:
    began = NOW - timedelta(minutes=10)
    window = TimeWindow.of_run(began, NOW)
    slack = timedelta(seconds=2)
    if began - slack <= moment <= NOW + slack:
        assert check_time(moment.isoformat(), window) == moment
        return
    with pytest.raises(RecordRefused) as refused:
        check_time(moment.isoformat(), window)
    assert refused.value.reason == (BEFORE_THE_RUN if moment < began else IN_THE_FUTURE)


def test_a_saved_record_without_a_zone_is_refused_when_read_from_a_file() -> None:
    sound = record("2026-11-27T08:00:00+00:00", "2026-11-27T08:00:00.200000+00:00")
    assert parse_cell(sound, now=NOW).wall_s == 0.2
    with pytest.raises(RecordRefused) as refused:
        parse_cell({**sound, "started": "2001-01-01T00:00:00"}, now=NOW)
    assert refused.value.reason == NO_TIME_ZONE


# -- zone-less, future and early records in a real run ---------------------------------


@pytest.mark.usefixtures("simulated")
def test_a_run_refuses_records_without_a_zone_in_the_future_or_before_it_began(
    tmp_path: Path,
) -> None:
    env = dict(os.environ)
    late = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    cells = [
        "%gpucost auto off",
        # the record: no zone, booked in 2001
        publishing(record("2001-01-01T00:00:00", "2001-01-01T00:00:00.200000")),
        publishing(record("2001-01-01T00:00:00+00:00", "2001-01-01T00:00:00.200000+00:00")),
        publishing(record(late, late)),
    ]
    ledger = tmp_path / "ledger.sqlite"
    done = gpucost_run(write(tmp_path, notebook(*cells)), env, "--ledger", f"sqlite:///{ledger}")
    assert done.returncode == 0, done.stderr
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    assert ignored(out) == {
        1: "its time has no time zone",
        2: "its time is before the run began",
        3: "its time is in the future",
    }
    assert all(METADATA_KEY not in c.metadata for c in out.cells)
    # nothing was booked in 2001 or in the future: the run's metered cost, today
    from jupyter_gpucost.server.ledger import Ledger

    book = Ledger(f"sqlite:///{ledger}")
    try:
        metered = out.metadata[METADATA_KEY]["metered"]["cost_micro_usd"]
        assert metered > 0
        assert book.totals(datetime.now(UTC)).today_micro == metered
        assert book.totals(datetime.now(UTC)).all_time_micro == metered
    finally:
        book.close()


@pytest.mark.usefixtures("simulated")
def test_mixed_zone_less_and_normal_records_reach_the_ledger_and_exit_0(tmp_path: Path) -> None:
    env = dict(os.environ)
    # before the fix: "can't compare offset-naive and offset-aware datetimes", the run's
    # cost never reached the ledger, and the runner still exited 0
    cells = [
        "import time\ntime.sleep(0.2)",
        publishing_last(record("2001-01-01T00:00:00", "2001-01-01T00:00:00.200000")),
        "time.sleep(0.1)",
    ]
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    done = gpucost_run(write(tmp_path, notebook(*cells)), env, "--ledger", ledger)
    assert done.returncode == 0, done.stderr
    assert "added to the ledger" in done.stderr
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    summary = out.metadata[METADATA_KEY]
    # cell 1's reply carried the zone-less record its code handed over last: refused, and
    # the others' records summed beside it
    assert summary["cells"] == 2
    assert ignored(out) == {1: "its time has no time zone"}
    from jupyter_gpucost.server.ledger import Ledger

    book = Ledger(ledger)
    try:
        today = book.totals(datetime.now(UTC)).today_micro
        assert today == summary["metered"]["cost_micro_usd"] >= summary["total_micro_usd"] > 0
        # the two priced cells; the refused record is booked nowhere (the run's metered
        # cost holds cell 1's time)
        assert len(book.recent_cells()) == 2
    finally:
        book.close()


# -- a ledger write that fails ---------------------------------------------------------


@pytest.mark.usefixtures("simulated")
def test_a_failing_ledger_write_is_an_error_exit_and_the_cost_is_kept_for_the_next_run(
    tmp_path: Path,
) -> None:
    env = dict(os.environ)
    from jupyter_gpucost.server.ledger import Ledger

    # the ledger's folder is a file: nothing can be written there
    blocker = tmp_path / "ledgers"
    blocker.write_text("not a folder")
    url = f"sqlite:///{blocker / 'ledger.sqlite'}"
    path = write(tmp_path, notebook("import time\ntime.sleep(0.3)"))
    first = gpucost_run(path, env, "--ledger", url)
    assert first.returncode == 6, first.stderr
    assert "could not be added to the ledger" in first.stderr
    assert "added at the next run" in first.stderr
    kept = list((Path(env["JUPYTER_DATA_DIR"]) / "gpucost" / "pending-runs").glob("*.json"))
    assert len(kept) == 1
    assert oct(kept[0].stat().st_mode & 0o777) == "0o600"
    first_cost = json.loads(kept[0].read_text())["entry"]["cost_micro_usd"]
    first_out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    assert first_cost == first_out.metadata[METADATA_KEY]["metered"]["cost_micro_usd"] > 0
    # the ledger can be written again: the next run adds the kept one first, then its own
    blocker.unlink()
    blocker.mkdir()
    second = gpucost_run(path, env, "--ledger", url)
    assert second.returncode == 0, second.stderr
    assert "1 earlier run added to the ledger" in second.stderr
    assert not kept[0].exists()
    second_out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    second_cost = second_out.metadata[METADATA_KEY]["metered"]["cost_micro_usd"]
    book = Ledger(url)
    try:
        assert book.totals(datetime.now(UTC)).today_micro == first_cost + second_cost
        assert len(book.recent_cells()) == 2
    finally:
        book.close()
    # a third run does not add the first one again
    third = gpucost_run(path, env, "--ledger", url)
    assert third.returncode == 0, third.stderr
    assert "earlier run" not in third.stderr


# -- every runner checks the rate ------------------------------------------------------


@pytest.mark.usefixtures("simulated")
def test_papermill_engine_refuses_a_record_priced_at_rate_zero(tmp_path: Path) -> None:
    env = dict(os.environ)
    now = datetime.now(UTC).isoformat()
    cells = ["%gpucost auto off", publishing(record(now, now, rate="0", gpus=[]), 0.2)]
    path = write(tmp_path, notebook(*cells))
    subprocess.run(
        [BIN / "papermill", "--engine", "gpucost", path, tmp_path / "out.ipynb"],
        check=True,
        env=env,
        capture_output=True,
        timeout=120,
    )
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert out.metadata[METADATA_KEY]["total_micro_usd"] == 0
    # papermill's parameters cell is not there (no parameters): the cells are ours
    assert ignored(out) == {1: NOT_THIS_RATE}
    assert METADATA_KEY not in out.cells[1].metadata


@pytest.mark.usefixtures("simulated")
def test_nbclient_refuses_a_record_priced_at_rate_zero() -> None:
    now = datetime.now(UTC).isoformat()
    nb = notebook("%gpucost auto off", publishing(record(now, now, rate="0", gpus=[]), 0.2))
    execute(nb, kernel_name="python3", timeout=60)
    assert nb.metadata[METADATA_KEY]["total_micro_usd"] == 0
    assert ignored(nb) == {1: NOT_THIS_RATE}


# -- a budget the notebook cannot dodge ------------------------------------------------

#: How long past the budget a killed run may be metered: the notebook is saved before the
#: kill (tens of milliseconds), the kill itself, and the watcher's look that sees the kernel
#: gone (every 0.1 s, each look a round trip to the kernel manager): 0.5 s on a busy machine
KILL_S = 0.5
#: a cell that swallows every interrupt, and whose kernel a shutdown request cannot reach
ENDLESS = (
    "import time\n"
    "while True:\n"
    "    try:\n"
    "        time.sleep(0.05)\n"
    "    except KeyboardInterrupt:\n"
    "        print('swallowed', flush=True)\n"
)


@pytest.mark.usefixtures("simulated")
def test_a_budget_smaller_than_the_stop_grace_shortens_the_steps_and_says_why(
    tmp_path: Path,
) -> None:
    # $0.002 at $6.862/h lasts about 1.05 s, less than the two 2 s steps: they are
    # shortened to fit, so the kill still lands at the budget, and the runner says why
    path = write(tmp_path, notebook(ENDLESS, "print('never')"))
    done = gpucost_run(path, dict(os.environ), "--budget", "0.002", "--stop-grace", "2")
    assert done.returncode == 3, done.stderr
    assert re.search(
        r"The 4 s grace is shortened to [01] s: at \$6\.86/h the full grace would go past "
        r"the budget\.",
        done.stderr,
    ), done.stderr
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    summary = out.metadata[METADATA_KEY]
    # interrupted before the loop caught it, or killed at the budget: never past it
    cost = summary["metered"]["cost_micro_usd"]
    assert cost <= 2000 + expected_cost_micro(RATE, KILL_S)
    assert out.cells[1].outputs == []


@pytest.mark.usefixtures("simulated")
def test_a_run_with_pricing_switched_off_is_stopped_at_the_budget(tmp_path: Path) -> None:
    env = dict(os.environ)
    # the issue: 12 s of cells on a $0.01 budget, exit 0, $0.00 recorded; at $6.862/h a
    # $0.004 budget lasts about 2.1 s, and a 0.5 s stop grace interrupts 1 s before it
    cells = ["%gpucost auto off", "import time\nfor _ in range(60):\n    time.sleep(0.5)", "x = 1"]
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    path = write(tmp_path, notebook(*cells))
    done = gpucost_run(path, env, "--budget", "0.004", "--stop-grace", "0.5", "--ledger", ledger)
    assert done.returncode == 3, done.stderr
    assert "stopped at the $0.0040 budget" in done.stderr
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    summary = out.metadata[METADATA_KEY]
    metered = summary["metered"]
    # no cell said what it cost; the runner did: never past the budget, the interrupt
    # (and its latency) within the stop grace's two steps before it
    assert summary["total_micro_usd"] == 0
    assert 4000 - expected_cost_micro(RATE, 1.1) <= metered["cost_micro_usd"] <= 4000
    assert metered["unattributed_micro_usd"] == metered["cost_micro_usd"]
    assert metered["wall_s"] < 5
    assert summary["stopped"]["cell"] == 1
    assert summary["stopped"]["by"] == "interrupt"
    assert out.cells[2].outputs == []
    from jupyter_gpucost.server.ledger import Ledger

    book = Ledger(ledger)
    try:
        assert book.totals(datetime.now(UTC)).today_micro == metered["cost_micro_usd"]
    finally:
        book.close()


@pytest.mark.usefixtures("simulated")
def test_a_cell_that_swallows_the_interrupt_is_shut_down_at_the_budget(tmp_path: Path) -> None:
    env = dict(os.environ)
    endless = ENDLESS
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    path = write(tmp_path, notebook("x = 1", endless, "print('never')"))
    saved = tmp_path / "in.gpucost.ipynb"
    run = subprocess.Popen(
        [
            *(BIN / "jupyter", "gpucost", "run", path, "--telemetry", "simulated"),
            *("--budget", "0.01", "--stop-grace", "2", "--ledger", ledger),
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    # the notebook is saved before each step: watch the file while the run is stopped
    seen: list[str] = []
    deadline = time.monotonic() + 90
    while run.poll() is None and time.monotonic() < deadline:
        step = saved_step(saved)
        if step and step not in seen:
            seen.append(step)
        time.sleep(0.05)
    if run.poll() is None:
        run.kill()
    stderr = run.communicate(timeout=10)[1]
    assert run.returncode == 3, stderr
    # the interrupt was swallowed (the cell said so), the shutdown request did not end the
    # busy kernel (ipykernel reads it only between cells), the kill did
    assert seen == ["interrupt", "shutdown", "kill"]
    out = nbformat.read(saved, as_version=4)
    summary = out.metadata[METADATA_KEY]
    assert "swallowed" in "".join(o.get("text", "") for o in out.cells[1].outputs)
    assert summary["stopped"]["cell"] == 1
    assert summary["stopped"]["by"] == "kill"
    metered = summary["metered"]
    # $0.01 lasts about 5.2 s: the interrupt came 4 s before the budget, the shutdown 2 s
    # before, the kill at it: a cap, the run metered at the budget (within KILL_S)
    assert "gpucost: stops at $0.01 — in about 4 s at $6.86/h; the notebook saved first" in (stderr)
    assert "shortened" not in stderr
    cost = metered["cost_micro_usd"]
    assert 10_000 <= cost <= 10_000 + expected_cost_micro(RATE, KILL_S)
    assert f"gpucost: the run cost ${cost / 1e6:.4f} of its $0.01 budget (" in stderr
    assert metered["cost_micro_usd"] >= summary["total_micro_usd"]
    assert out.cells[2].outputs == []
    from jupyter_gpucost.server.ledger import Ledger

    book = Ledger(ledger)
    try:
        assert book.totals(datetime.now(UTC)).today_micro == metered["cost_micro_usd"]
    finally:
        book.close()
