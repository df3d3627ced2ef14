"""The wire documents against their contract (labextension/src/__tests__/wire-contract.json).

The contract is ``core/wire.py``'s types written out; the front end's tests check its
TypeScript types against the same file (``wire-contract.spec.ts``). Here: the file is
what the types say, and what a real server sends (status, kernels, history, the panel's
event) and what the hub service builds (its summary, the report and its reply) match it
key by key.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.core.hub_protocol import GpuTime, KernelSpend, SpendReport
from jupyter_gpucost.core.wire_schema import conforms, contract
from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.idle.policy import HubIdleClock, IdlePolicy
from jupyter_gpucost.hub.idle.reclaim import Reclaimer
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerInfo
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web import views
from jupyter_gpucost.server.status_events import PANEL_EVENT_SCHEMA_ID

ROOT = Path(__file__).resolve().parent.parent
CONTRACT_PATH = ROOT / "labextension/src/__tests__/wire-contract.json"
CONTRACT: dict[str, Any] = json.loads(CONTRACT_PATH.read_text())
PARTS: dict[str, dict[str, str]] = CONTRACT["parts"]


def mismatches(document: str, value: object) -> list[str]:
    """What in ``value`` (sent as JSON) the contract's ``document`` does not allow."""
    sent = json.loads(json.dumps(value))
    return conforms(sent, CONTRACT["documents"][document], PARTS)


def test_the_contract_file_is_what_the_types_say() -> None:
    assert json.loads(json.dumps(contract())) == CONTRACT
    # and the script that writes it agrees (a contributor runs it after changing a type)
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts/wire_contract.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout


def test_every_document_of_the_issue_is_in_the_contract() -> None:
    assert set(CONTRACT["documents"]) == {
        "status",
        "kernels",
        "history",
        "panel",
        "hub_summary",
        "hub_report",
        "hub_reply",
    }
    status = PARTS["StatusDocument"]
    assert status["cost_usd"] == "number"
    assert status["gpus"] == "#StatusGpu[]"
    assert status["budget"] == "null|object"
    assert PARTS["KernelsDocument"]["other_processes"] == "#OtherProcessJson[]|absent"


def test_the_check_sees_a_key_missing_unknown_or_of_the_wrong_kind() -> None:
    # the checks below must be able to fail
    history = {
        "window_s": 900,
        "step_s": "5",
        "start": "2026-01-01T00:00:00+00:00",
        "end": "2026-01-01T00:15:00+00:00",
        "source": "memory",
        "gpus": [{"index": 0, "name": "A100", "extra": 1}],
        "points": [],
        "totals": {"sessions": [], "days": []},
        "surprise": True,
    }
    assert sorted(mismatches("history", history)) == [
        "$.gpus[0].extra: not in the contract's HistoryGpu",
        "$.oldest_in_memory: missing",
        "$.step_s: string, the contract says number",
        "$.surprise: not in the contract's HistoryDocument",
    ]


async def get(jp_fetch: Any, *route: str, **params: str) -> Any:
    return json.loads((await jp_fetch("gpucost", "api", *route, params=params)).body)


async def next_event(ws: Any, schema_id: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no {schema_id} event in {timeout_s} s"
        message = await asyncio.wait_for(ws.read_message(), left)
        assert message is not None, "the event socket closed"
        event = json.loads(message)
        if event.get("schema_id") == schema_id:
            return event  # type: ignore[no-any-return]


class TestARealServer:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.5,
            "hard_budget_usd": 50.0,
            "budget_state_path": str(tmp_path / "budget.json"),
        }

    async def test_its_documents_match_the_contract(self, jp_fetch: Any, jp_ws_fetch: Any) -> None:
        kernel = json.loads((await jp_fetch("api", "kernels", method="POST", body="{}")).body)
        deadline = time.monotonic() + 60
        while True:
            kernels = await get(jp_fetch, "kernels")
            if any(k["id"] == kernel["id"] for k in kernels["kernels"]):
                break
            assert time.monotonic() < deadline, "the kernel never showed in the kernels"
            await asyncio.sleep(0.5)
        status = await get(jp_fetch, "status")
        assert status["budget"] is not None
        assert kernels["kernels"]
        assert mismatches("status", status) == []
        assert mismatches("kernels", kernels) == []
        for window in ("15m", "24h"):
            history = await get(jp_fetch, "history", window=window)
            assert history["points"], window
            assert mismatches("history", history) == [], window
        ws = await jp_ws_fetch("api", "events", "subscribe")
        try:
            event = await next_event(ws, PANEL_EVENT_SCHEMA_ID, 30)
        finally:
            ws.close()
        assert event["panel"]["kernels"]["kernels"]
        assert mismatches("panel", event["panel"]) == []
        # each amount under its currency-neutral name, with the value of its old _usd twin
        # (the cells are the records kernels publish: saved data, their names kept)
        sent = {"status": status, "kernels": kernels, "history": history}
        sent["panel"] = {k: v for k, v in event["panel"].items() if k != "cells"}
        twins = usd_twins(sent)
        assert [path for path, (old, new) in twins.items() if old != new] == []
        for key in (
            "$.status.cost_usd",
            "$.status.rate_usd_per_hour",
            "$.status.gpus[0].price_usd_per_hour",
            "$.status.ledger.unwritten_micro_usd",
            "$.status.budget.hard.amount_usd",
            "$.status.budget.hard.spent_usd",
            "$.status.budget.stop.rate_usd_per_hour",
            "$.kernels.total_usd",
            "$.kernels.micro_usd",
            "$.kernels.kernels[0].cost_micro_usd",
            "$.history.points[0].rate_usd_per_hour",
            "$.panel.kernels.kernels[0].cells_cost_usd",
        ):
            assert key in twins, key
        budget = await get(jp_fetch, "budget")
        assert budget["hard"]["amount"] == budget["hard"]["amount_usd"] == 50.0
        assert [path for path, (old, new) in usd_twins(budget).items() if old != new] == []


def usd_twins(value: object, where: str = "$") -> dict[str, tuple[object, object]]:
    """Every old ``_usd`` key of a document beside its currency-neutral twin (the name with
    ``_usd`` taken out, docs/api.md "Money keys"): ``{path: (old value, new value)}``; a twin
    that is missing reads as the string "missing"."""
    found: dict[str, tuple[object, object]] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            if "_usd" in key:
                found[f"{where}.{key}"] = (item, value.get(key.replace("_usd", ""), "missing"))
            found.update(usd_twins(item, f"{where}.{key}"))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.update(usd_twins(item, f"{where}[{i}]"))
    return found


def test_the_twin_check_sees_a_missing_or_different_twin() -> None:
    doc = {"cost_usd": 1.5, "cost": 1.5, "gpus": [{"price_usd_per_hour": 2.0}], "x": {"a_usd": 1}}
    doc["x"]["a"] = 2  # type: ignore[index]
    assert usd_twins(doc) == {
        "$.cost_usd": (1.5, 1.5),
        "$.gpus[0].price_usd_per_hour": (2.0, "missing"),
        "$.x.a_usd": (1, 2),
    }


NOW = datetime.now(UTC).replace(microsecond=0)
RATE = Rate(GpuAllocation("A100-80GB", 2), Decimal("3.431"), "test")


def test_the_hub_summary_report_and_reply_match_the_contract(tmp_path: Path) -> None:
    ledger = HubLedger(f"sqlite:///{tmp_path / 'hub.sqlite'}", billing=BillingRule(1, 0))
    reclaimer = Reclaimer(IdlePolicy({"*": {"after_min": 5}}), HubIdleClock(max_step_s=10), None)
    svc = HubService(ledger, lambda s: RATE, HubBudgetPolicy(), HubEnforcer(60), reclaimer)
    try:
        svc.sync([ServerInfo("dora", "", NOW - timedelta(minutes=10), True)], NOW)
        report = SpendReport(
            "s-1",
            "",
            NOW - timedelta(minutes=10),
            NOW,
            1_500_000,
            200_000,
            950,
            energy_wh=12.5,
            cells=3,
            kernels=(KernelSpend("k-1", "python3", 1_000_000),),
            gpu_models=("A100-80GB",),
            kernels_busy=1,
            gpu_time=(GpuTime(500_000_000, 100_000_000),),
        )
        assert mismatches("hub_report", report.to_json()) == []
        reply = svc.report("dora", report, NOW)
        assert mismatches("hub_reply", reply.to_json()) == []
        summary = views.admin_summary(svc, NOW, NOW.date())
        assert summary["users"][0]["running"]
        assert mismatches("hub_summary", summary) == []
    finally:
        ledger.close()
