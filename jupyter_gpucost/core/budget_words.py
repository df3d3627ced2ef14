"""The sentences about a budget's countdown that the server, the hub service and the
headless runner all say: how long until the stop, as a person reads it ahead, and why a
countdown is shorter than the grace period (:mod:`.budget_timing`).

Each takes the reader's :class:`~jupyter_gpucost.core.i18n.Messages` (none: the process's
language, as the single-user server and the runner speak), and an hourly rate already
written for that reader (the caller owns its currency's spelling).
"""

from __future__ import annotations

from .budget_timing import SHORTENED_SPENT
from .i18n import Messages, current_language, messages_for


def _in(messages: Messages | None) -> Messages:
    return messages if messages is not None else messages_for(current_language())


def cannot_stop(messages: Messages | None = None) -> str:
    """What a budget warning adds where its action is ``stop-instance`` and the machine
    cannot be stopped (an AWS one-time Spot Instance: ``Machine.cannot_stop``)."""
    _ = _in(messages).gettext  # by this name, the catalog's tool finds the sentences
    return _("This machine cannot be stopped; it bills until terminated.")


def about(seconds: float, messages: Messages | None = None) -> str:
    """A duration as a person reads it ahead: ``40 s``, ``14 min``, ``2 h 10 min``."""
    _ = _in(messages).gettext  # by this name, the catalog's tool finds the sentences
    whole = max(0, round(seconds))
    if whole < 60:
        return _("{seconds} s").format(seconds=whole)
    minutes = round(whole / 60)
    if minutes < 60:
        return _("{minutes} min").format(minutes=minutes)
    hours, minutes = divmod(minutes, 60)
    return _("{hours} h {minutes} min").format(hours=hours, minutes=minutes)


def shortened(
    why: str, grace_s: float, countdown_s: float, rate_text: str, messages: Messages | None = None
) -> str:
    """Why the countdown is ``countdown_s``, not the ``grace_s`` grace period: the budget
    was spent when it was first checked (``"spent"``), or the full grace would go past it
    at ``rate_text`` (``"overrun"``)."""
    _ = _in(messages).gettext  # by this name, the catalog's tool finds the sentences
    if why == SHORTENED_SPENT:
        text = _(
            "The budget was already spent when it was checked: no {grace} s grace, so the "
            "bill stops at the budget."
        )
    else:
        text = _(
            "The {grace} s grace is shortened to {seconds} s: at {rate} the full grace would "
            "go past the budget."
        )
    return text.format(
        grace=f"{round(grace_s, 1):g}", seconds=f"{round(countdown_s):d}", rate=rate_text
    )
