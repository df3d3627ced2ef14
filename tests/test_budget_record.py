"""The budget's action record: typed in memory, the same JSON in the state file, the
ledger and the API as before it was typed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jupyter_gpucost.server.budget.messages import kernels_acted, summary
from jupyter_gpucost.server.budget.policy import Budget
from jupyter_gpucost.server.budget.record import ActionRecord, BudgetFigures
from jupyter_gpucost.server.budget.store import BudgetStore, StoredState
from jupyter_gpucost.server.ledger import Ledger

BASE = ActionRecord(
    at="2026-11-22T14:02:03.123456Z",
    reason="budget",
    action="shutdown",
    notebooks_saved=2,
    save_failed=("a.ipynb",),
    browsers=1,
    exported="checkpoints exported to file:///tmp/x",
    budget=BudgetFigures("hard", "session", 5_000_000, 5_012_345),
)

# each shape of record the controller writes, as JSON, keys in the order written
SHAPES = {
    "shutdown": (
        BASE.with_outcome("done", "stopped ...; 1 kernel(s) shut down", kernels=1),
        {
            "at": "2026-11-22T14:02:03.123456Z",
            "reason": "budget",
            "action": "shutdown",
            "notebooks_saved": 2,
            "save_failed": ["a.ipynb"],
            "browsers": 1,
            "exported": "checkpoints exported to file:///tmp/x",
            "budget_kind": "hard",
            "scope": "session",
            "amount_usd": 5.0,
            "spent_usd": 5.012345,
            "result": "done",
            "kernels": 1,
            "message": "stopped ...; 1 kernel(s) shut down",
        },
    ),
    "idle skipped": (
        ActionRecord(at="2026-11-22T14:02:03Z", reason="idle", action="interrupt").with_outcome(
            "skipped", "idle stop skipped: a kernel is busy", detail="1 kernel(s) busy"
        ),
        {
            "at": "2026-11-22T14:02:03Z",
            "reason": "idle",
            "action": "interrupt",
            "notebooks_saved": 0,
            "save_failed": [],
            "browsers": 0,
            "exported": None,
            "result": "skipped",
            "detail": "1 kernel(s) busy",
            "message": "idle stop skipped: a kernel is busy",
        },
    ),
    "hub requested": (
        BASE.with_outcome("requested", "stopped ...; server stopped", via="jupyterhub"),
        {
            **BASE.to_json(),
            "result": "requested",
            "via": "jupyterhub",
            "message": "stopped ...; server stopped",
        },
    ),
    "server stopped": (
        BASE.with_outcome("done", "stopped ...; server stopped", kernels=0, via="self"),
        {
            **BASE.to_json(),
            "result": "done",
            "via": "self",
            "kernels": 0,
            "hub": None,
            "message": "stopped ...; server stopped",
        },
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_json_shape_and_round_trip(shape: str) -> None:
    record, expected = SHAPES[shape]
    out = record.to_json()
    assert list(out.items()) == list(expected.items())
    assert ActionRecord.from_json(json.loads(json.dumps(out))) == record


def test_a_record_round_trips_through_the_state_file(tmp_path: Path) -> None:
    store = BudgetStore(tmp_path / "budget.json")
    records = [record for record, _ in SHAPES.values()]
    store.save(StoredState(soft=Budget("soft", 3_000_000, "day"), actions=records))
    on_disk = json.loads((tmp_path / "budget.json").read_text())
    assert on_disk["actions"] == [expected for _, expected in SHAPES.values()]
    assert store.load().actions == records


def test_a_state_file_written_before_the_record_was_typed_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "budget.json"
    old = {
        "version": 1,
        "soft": {"amount_micro_usd": 2_500_000, "scope": "session"},
        "fired": {"hard:session:5000000:s1": [50, 80]},
        "actions": [expected for _, expected in SHAPES.values()],
    }
    path.write_text(json.dumps(old, indent=1))
    store = BudgetStore(path)
    state = store.load()
    assert not (tmp_path / "budget.json.corrupt").exists()
    assert state.soft == Budget("soft", 2_500_000, "session")
    assert [a.result for a in state.actions] == ["done", "skipped", "requested", "done"]
    assert state.actions[0].budget == BudgetFigures("hard", "session", 5_000_000, 5_012_345)
    store.save(state)
    assert json.loads(path.read_text()) == old


def test_a_record_round_trips_through_the_ledger(tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    record, expected = SHAPES["shutdown"]
    ledger.start_session("s1", datetime(2026, 11, 22, 14, 0, tzinfo=UTC), None)
    ledger.add_action("s1", record.to_json())
    (kept,) = ledger.actions(10)
    assert kept == {**expected, "session_id": "s1"}
    assert ActionRecord.from_json(kept) == record
    ledger.close()


def test_the_summary_reads_the_typed_record() -> None:
    assert summary(BASE, "$") == "stopped at $5.00 budget at 14:02 UTC; 2 notebooks saved"
    idle = ActionRecord(at="2026-11-22T09:30:00Z", reason="idle", action="shutdown")
    assert summary(idle, "€") == "stopped idle GPUs at 09:30 UTC; 0 notebooks saved"


def test_a_budget_reads_as_everywhere_else_and_counts_take_their_plural() -> None:
    small = ActionRecord(
        at="2026-11-22T14:02:00Z",
        reason="budget",
        action="shutdown",
        notebooks_saved=1,
        budget=BudgetFigures(kind="soft", scope="session", amount_micro=50_000, spent_micro=50_000),
    )
    # a budget reads by the budget's rule ($0.05) in the status bar, the panel, the
    # tooltip and the message alike
    text = summary(small, "$")
    assert text == "stopped at $0.05 budget at 14:02 UTC; 1 notebook saved"
    assert kernels_acted(text, "shutdown", 1).endswith("; 1 kernel shut down")
    assert kernels_acted(text, "interrupt", 3).endswith("; 3 kernels interrupted")
