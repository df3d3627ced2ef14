"""What is left of the hub's allowances, for ``%gpucost``'s status lines: read-only, as the
server's status reports them (``budget.hub.allowances``; the hub sets them, the user cannot
change them here).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime

from ...core.budget_words import about
from ...core.i18n import _
from ...core.money import status_bar


def period_words(period: str) -> str:
    """``this week``, ``today``, ``in the last 7 days``; a balance: ``until it tops up``
    (the hub's own words for its periods)."""
    if period == "day":
        return _("today")
    if period == "week":
        return _("this week")
    if period == "month":
        return _("this month")
    if period == "balance":
        return _("until it tops up")
    days = re.fullmatch(r"(\d+) days?", period)
    if days:
        return _("in the last {days} days").format(days=days.group(1))
    return period


def left_words(allowance: Mapping[str, object], symbol: str) -> str:
    """``6 h 20 min of GPU time left this week``, ``$12.40 left this month``."""
    left = max(0.0, _number(allowance.get("left")))
    period = period_words(str(allowance.get("period") or ""))
    if allowance.get("unit") == "gpu_hours":
        text = _("{duration} of GPU time left {period}")
        return text.format(duration=about(left * 3600), period=period)
    return _("{left} left {period}").format(left=status_bar(left, symbol), period=period)


def refill_words(allowance: Mapping[str, object]) -> str:
    """``fills up again on Mon 2026-11-30 00:00 UTC`` (in the kernel's time zone), or
    ``tops up on …`` for a balance; empty when the time cannot be read."""
    try:
        at = datetime.fromisoformat(str(allowance.get("refill_at") or "").replace("Z", "+00:00"))
        local = at.astimezone()
    except (ValueError, OverflowError):
        return ""
    when = local.strftime("%a %Y-%m-%d %H:%M ") + (local.tzname() or "")
    if allowance.get("period") == "balance":
        return _("tops up on {when}").format(when=when)
    return _("fills up again on {when}").format(when=when)


def allowance_lines(budget: Mapping[str, object], symbol: str) -> list[str]:
    """One line per allowance of the hub in the budget's status: ``  hub allowance: 6 h 20 min
    of GPU time left this week, fills up again on …; set by your hub admin (read-only)``."""
    hub = budget.get("hub")
    allowances = hub.get("allowances") if isinstance(hub, Mapping) else None
    if not isinstance(allowances, list):
        return []
    lines: list[str] = []
    for a in allowances:
        if not isinstance(a, Mapping):
            continue
        source = str(a.get("source") or "")
        if source.startswith("group:"):
            who = _("group {group}, set by your hub admin (read-only)").format(
                group=source.removeprefix("group:")
            )
        else:
            who = _("set by your hub admin (read-only)")
        refill = refill_words(a)
        text = _("  hub allowance: {left}{refill}; {who}")
        lines.append(
            text.format(left=left_words(a, symbol), refill=f", {refill}" if refill else "", who=who)
        )
    return lines


def _number(value: object) -> float:
    """A finite number, else 0 (the status is JSON: no infinity in it)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    try:
        number = float(value)
    except OverflowError:
        return 0.0
    return number if math.isfinite(number) else 0.0
