"""What the budget guard reports: its figures at one moment (:class:`GuardSummary`, as a
live line and as a table), and what it raises (:class:`BudgetExceeded`) and warns
(:class:`BudgetWarning`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from ...core.i18n import _
from ...core.money import budget, exact, guard_line, status_bar
from .old_names import DollarNames


class BudgetExceeded(Exception):
    """Raised by :meth:`Guard.step` when one more step would take the spend over budget.

    ``summary`` holds the guard's figures at the moment it stopped.
    """

    def __init__(self, message: str, summary: GuardSummary) -> None:
        super().__init__(message)
        self.summary = summary


class BudgetWarning(UserWarning):
    """The projected cost of the loop is over its budget."""


@dataclass(frozen=True)
class GuardSummary(DollarNames):
    """The guard's figures at one moment. Money in the session's currency (exact Decimals)."""

    steps: int
    total_steps: int
    elapsed_s: float
    per_hour: Decimal
    budget: Decimal
    spent: Decimal
    #: measured seconds per step (the first step left out once there are two or more)
    seconds_per_step: float | None
    per_step: Decimal | None
    per_1k_tokens: Decimal | None
    #: the whole loop's cost and end, projected once ``warmup_steps`` steps are done
    projected: Decimal | None
    projected_end: datetime | None
    warned: bool
    stopped: bool
    currency_symbol: str = "$"

    def line(self) -> str:
        """One line for the live display."""
        sym = self.currency_symbol
        parts = [
            _("step {n}/{total}").format(n=f"{self.steps:,}", total=f"{self.total_steps:,}"),
            _("{spent} spent of {budget}").format(
                spent=f"{sym}{guard_line(self.spent)}",
                budget=f"{sym}{guard_line(self.budget)}",
            ),
        ]
        if self.per_step is not None:
            parts.append(_("{cost}/step").format(cost=f"{sym}{guard_line(self.per_step)}"))
        if self.per_1k_tokens is not None:
            cost = f"{sym}{guard_line(self.per_1k_tokens)}"
            parts.append(_("{cost}/1k tokens").format(cost=cost))
        if self.projected is not None and self.projected_end is not None:
            over = _(" (over budget)") if self.projected > self.budget else ""
            ends = "" if self.stopped else _(", ends {when}").format(when=_when(self.projected_end))
            cost = f"{sym}{guard_line(self.projected)}"
            parts.append(_("projected {cost}{over}{ends}").format(cost=cost, over=over, ends=ends))
        elif self.steps < self.total_steps and not self.stopped:
            parts.append(_("measuring the step rate"))
        if self.per_hour == 0:
            parts.append(_("rate 0/h: no priced GPU here"))
        if self.stopped:
            parts.append(_("stopped before the budget ran out"))
        return " · ".join(parts)

    def __str__(self) -> str:
        """The figures as a table, in the kernel's language; amounts by the display rules
        (:mod:`jupyter_gpucost.core.money`): spent and projected as every view shows an
        amount spent, the budget as a budget, the rate as a price, per step as the live
        line."""
        sym = self.currency_symbol
        rows = [
            (
                _("steps"),
                _("{n} of {total}").format(n=f"{self.steps:,}", total=f"{self.total_steps:,}"),
            ),
            (_("time"), _("{seconds} s").format(seconds=f"{self.elapsed_s:.1f}")),
            (_("rate"), _("{price}/h").format(price=exact(self.per_hour, sym))),
            (
                _("spent"),
                _("{n} of {total}").format(
                    n=status_bar(self.spent, sym), total=budget(self.budget, sym)
                ),
            ),
        ]
        if self.seconds_per_step is not None:
            cost = "" if self.per_step is None else f"{sym}{guard_line(self.per_step)}"
            per_step = _("{seconds} s, {cost}") if cost else _("{seconds} s")
            rows.append(
                (_("per step"), per_step.format(seconds=f"{self.seconds_per_step:.4f}", cost=cost))
            )
        if self.per_1k_tokens is not None:
            rows.append((_("per 1k tokens"), f"{sym}{guard_line(self.per_1k_tokens)}"))
        if self.projected is not None and self.projected_end is not None:
            text = _("{cost}, ends {when}")
            when = f"{self.projected_end:%Y-%m-%d %H:%M:%S}"
            cost = status_bar(self.projected, sym)
            rows.append((_("projected"), text.format(cost=cost, when=when)))
        if self.stopped:
            rows.append((_("stopped"), _("one more step would have gone over the budget")))
        row = _("{label}: {value}")
        lines = ["  " + row.format(label=k, value=v) for k, v in rows]
        return "\n".join([_("guard"), *lines])


def _when(moment: datetime) -> str:
    """When the loop ends, with how long until then in the unit that reads best."""
    now = datetime.now(moment.tzinfo)
    left = max(0.0, (moment - now).total_seconds())
    if left < 90:
        return _("{time} (in {n} s)").format(time=f"{moment:%H:%M:%S}", n=f"{left:.0f}")
    if left < 90 * 60:
        return _("{time} (in {n} min)").format(time=f"{moment:%H:%M}", n=f"{left / 60:.0f}")
    if left < 48 * 3600:
        return _("{time} (in {n} h)").format(time=f"{moment:%H:%M}", n=f"{left / 3600:.1f}")
    days = f"{left / 86400:.1f}"
    return _("{time} (in {n} days)").format(time=f"{moment:%Y-%m-%d %H:%M}", n=days)
