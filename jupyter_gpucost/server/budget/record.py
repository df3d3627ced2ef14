"""What a budget did: one typed, immutable record per action.

The record travels from the save → export → act sequence into the state file, the ledger,
the API and the summary text. It becomes JSON in one place (:meth:`ActionRecord.to_json`)
and comes back from JSON in one place (:meth:`ActionRecord.from_json`); the JSON shape is
the one the state file, the ledger and the browser have always seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Literal

from ...core.money import MICRO_PER_UNIT, json_amount

#: "done": the action was taken; "skipped": it was not (a kernel became busy);
#: "requested": JupyterHub was asked to stop the server (kept before the answer comes)
Result = Literal["done", "skipped", "requested"]


def _micro(value: object) -> int:
    """A ``*_usd`` JSON number back to whole micro-dollars (exact: six decimals at most)."""
    return int((Decimal(str(value)) * MICRO_PER_UNIT).to_integral_value())


@dataclass(frozen=True)
class BudgetFigures:
    """The budget that ran out: its kind, scope, amount and what was spent."""

    kind: str
    scope: str
    amount_micro: int
    spent_micro: int


@dataclass(frozen=True)
class ActionRecord:
    """One budget action (or one that was skipped), as it is kept and shown."""

    at: str
    reason: str
    action: str
    notebooks_saved: int = 0
    save_failed: tuple[str, ...] = ()
    browsers: int = 0
    exported: str | None = None
    budget: BudgetFigures | None = None
    result: Result | None = None
    #: kernels interrupted or shut down
    kernels: int | None = None
    #: who stopped the server: "jupyterhub" or "self" (stop-server only)
    via: str | None = None
    #: JupyterHub's answer (stop-server only, after the answer)
    hub: str | None = None
    #: why the action was skipped
    detail: str | None = None
    message: str = ""
    #: the cloud's answer to ``stop-instance`` ("failed: why" when it did not stop)
    instance: str | None = None
    #: what the machine still costs per hour after the action (``None``: not known, or
    #: the machine is stopping)
    still_usd_per_hour: Decimal | None = None

    def with_outcome(
        self,
        result: Result,
        message: str,
        *,
        kernels: int | None = None,
        via: str | None = None,
        hub: str | None = None,
        detail: str | None = None,
    ) -> ActionRecord:
        return replace(
            self, result=result, message=message, kernels=kernels, via=via, hub=hub, detail=detail
        )

    def with_still(self, rate_per_hour: Decimal) -> ActionRecord:
        return replace(self, still_usd_per_hour=rate_per_hour)

    def with_instance(self, answer: str) -> ActionRecord:
        return replace(self, instance=answer)

    def with_message(self, message: str) -> ActionRecord:
        return replace(self, message=message)

    # -- the edges: JSON in, JSON out -----------------------------------------------------

    def to_json(self) -> dict[str, object]:
        out: dict[str, Any] = {
            "at": self.at,
            "reason": self.reason,
            "action": self.action,
            "notebooks_saved": self.notebooks_saved,
            "save_failed": list(self.save_failed),
            "browsers": self.browsers,
            "exported": self.exported,
        }
        if self.budget is not None:
            out["budget_kind"] = self.budget.kind
            out["scope"] = self.budget.scope
            out["amount_usd"] = json_amount(self.budget.amount_micro)
            out["spent_usd"] = json_amount(self.budget.spent_micro)
        if self.result is None:
            return out
        out["result"] = self.result
        if self.result == "skipped":
            out["detail"] = self.detail
        elif self.via is None:
            out["kernels"] = self.kernels
        elif self.result == "requested":
            out["via"] = self.via
        else:
            out["via"] = self.via
            out["kernels"] = self.kernels
            out["hub"] = self.hub
        if self.instance is not None:
            out["instance"] = self.instance
        if self.still_usd_per_hour is not None:
            out["still_usd_per_hour"] = float(self.still_usd_per_hour)
        out["message"] = self.message
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ActionRecord:
        """A record as the state file keeps it (raises ValueError/TypeError when it is not
        one); keys a record does not have take their defaults."""
        budget = None
        if raw.get("amount_usd") is not None:
            budget = BudgetFigures(
                kind=str(raw.get("budget_kind", "")),
                scope=str(raw.get("scope", "")),
                amount_micro=_micro(raw["amount_usd"]),
                spent_micro=_micro(raw.get("spent_usd") or 0),
            )
        result = raw.get("result")
        if result not in (None, "done", "skipped", "requested"):
            raise ValueError(f"unknown action result {result!r}")

        def text(key: str) -> str | None:
            value = raw.get(key)
            return None if value is None else str(value)

        kernels = raw.get("kernels")
        still = raw.get("still_usd_per_hour")
        return cls(
            at=str(raw.get("at", "")),
            reason=str(raw.get("reason", "budget")),
            action=str(raw.get("action", "")),
            notebooks_saved=int(raw.get("notebooks_saved", 0)),
            save_failed=tuple(str(p) for p in raw.get("save_failed", ())),
            browsers=int(raw.get("browsers", 0)),
            exported=text("exported"),
            budget=budget,
            result=result,
            kernels=None if kernels is None else int(kernels),
            via=text("via"),
            hub=text("hub"),
            detail=text("detail"),
            message=str(raw.get("message", "")),
            instance=text("instance"),
            still_usd_per_hour=None if still is None else Decimal(str(still)),
        )
