"""What the budget keeps across restarts: the soft budget, fired thresholds, actions taken.

A small JSON file in the Jupyter data dir (``<data dir>/gpucost/budget.json``), written
atomically (temporary file + rename). A file that cannot be read is moved aside with a
warning and a fresh one started: a broken file must never stop the server. Actions are
:class:`ActionRecord` values in memory and their JSON in the file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .parse import parse_amount, parse_scope
from .policy import Budget, BudgetError
from .record import ActionRecord

#: actions kept in the file (newest last)
MAX_ACTIONS = 50
#: arming keys kept (the newest ones)
MAX_KEYS = 200


@dataclass
class StoredState:
    soft: Budget | None = None
    fired: dict[str, list[int]] = field(default_factory=dict)
    actions: list[ActionRecord] = field(default_factory=list)


def _soft_to_json(budget: Budget | None) -> dict[str, object] | None:
    if budget is None:
        return None
    return {"amount_micro_usd": budget.amount_micro, "scope": budget.scope}


class BudgetStore:
    def __init__(self, path: Path, *, log: logging.Logger | None = None) -> None:
        self.path = path
        self.log = log or logging.getLogger("jupyter_gpucost")
        self._lock = threading.Lock()

    def load(self) -> StoredState:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return StoredState()
        except OSError as e:
            self.log.warning(
                "jupyter-gpucost: cannot read %s (%s); budgets start afresh", self.path, e
            )
            return StoredState()
        try:
            raw = json.loads(text)
            soft_raw = raw.get("soft")
            soft = None
            if soft_raw is not None:
                amount = int(soft_raw["amount_micro_usd"])
                parse_amount(amount / 1_000_000, what="stored soft budget")
                soft = Budget("soft", amount, parse_scope(soft_raw["scope"], what="stored scope"))
            fired = {str(k): [int(t) for t in v] for k, v in dict(raw.get("fired", {})).items()}
            actions = [ActionRecord.from_json(dict(a)) for a in raw.get("actions", [])]
            return StoredState(soft=soft, fired=fired, actions=actions)
        except (ValueError, KeyError, TypeError, AttributeError, BudgetError) as e:
            aside = self.path.with_suffix(".json.corrupt")
            self.log.warning(
                "jupyter-gpucost: %s is not a valid budget file (%s): moved to %s, starting afresh",
                self.path,
                e,
                aside,
            )
            with contextlib.suppress(OSError):
                os.replace(self.path, aside)
            return StoredState()

    def save(self, state: StoredState) -> None:
        """Write the state atomically (blocking: call it off the event loop)."""
        keys = list(state.fired)[-MAX_KEYS:]
        payload = {
            "version": 1,
            "soft": _soft_to_json(state.soft),
            "fired": {k: sorted(state.fired[k]) for k in keys},
            "actions": [a.to_json() for a in state.actions[-MAX_ACTIONS:]],
        }
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".json.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(payload, indent=1), encoding="utf-8")
            os.replace(tmp, self.path)
