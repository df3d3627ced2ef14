"""The user's own stop request: ``{"action": "stop-instance", "reason": "user"}``."""

from __future__ import annotations

from collections.abc import Mapping

from ..inputs import shown
from .policy import ACTIONS, USER_REASONS, BudgetError


def parse_stop_request(body: Mapping[str, object]) -> tuple[str | None, str]:
    """The action asked for (``None``: the configured one) and why ("user" or "done")."""
    unknown = sorted(set(body) - {"action", "reason"})
    if unknown:
        raise BudgetError("unknown field(s): send action and reason")
    action = body.get("action")
    if action is not None and action not in ACTIONS:
        raise BudgetError(f"action must be one of {', '.join(ACTIONS)}, not {shown(action)}")
    reason = body.get("reason", "user")
    if reason not in USER_REASONS:
        raise BudgetError(f"reason must be one of {', '.join(USER_REASONS)}, not {shown(reason)}")
    return (None if action is None else str(action)), str(reason)
