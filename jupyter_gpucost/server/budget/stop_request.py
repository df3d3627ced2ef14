"""The user's own stop request: ``{"action": "stop-instance", "reason": "user"}``.

``"when": "idle"`` (with reason ``done``) waits until no kernel is busy (the running cells
or training runs have ended, finished or failed) before the countdown starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...core.i18n import _
from ..inputs import one_of
from .policy import USER_ACTIONS, USER_REASONS, BudgetError

WHEN = ("now", "idle")


@dataclass(frozen=True)
class StopRequest:
    #: the action at the end of the countdown (``None``: the configured one)
    action: str | None
    #: "user" (stop now) or "done" (a cell or run the user asked to stop after ended)
    reason: str
    #: "now", or "idle": once no kernel is busy
    when: str = "now"


def parse_stop_request(body: Mapping[str, object]) -> StopRequest:
    unknown = sorted(set(body) - {"action", "reason", "when"})
    if unknown:
        raise BudgetError(_("unknown field(s): send action, reason and when"))
    action = body.get("action")
    if action is not None and action not in USER_ACTIONS:
        raise BudgetError(one_of("action", USER_ACTIONS, action))
    reason = body.get("reason", "user")
    if reason not in USER_REASONS:
        raise BudgetError(one_of("reason", USER_REASONS, reason))
    when = body.get("when", "now")
    if when not in WHEN:
        raise BudgetError(one_of("when", WHEN, when))
    return StopRequest(None if action is None else str(action), str(reason), str(when))
