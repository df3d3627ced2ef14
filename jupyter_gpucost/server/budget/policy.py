"""The budget policy: a pure state machine, no clocks, threads, I/O or tornado of its own.

Budgets:

* **hard**: the admin's (``c.GpuCost.hard_budget_usd`` or ``GPUCOST_BUDGET_USD`` from the
  spawner); locked: nothing the user sends can change it.
* **soft**: the user's (settings, ``PUT /gpucost/api/budget``); it can be raised,
  lowered or removed;
* **hub**: the hub service's (:mod:`..hub_link`), locked, counted with the spend the hub
  keeps; the service may also name when it stops the server (``deadline``): the
  countdown then ends in time to save before it.

Each budget counts what was spent in its scope (this session, today, this month). The
**binding** budget is the one with the least money left. States, in order:

``none`` (no budget) → ``ok`` → ``warning`` (a threshold crossed) → ``grace`` (a budget
is spent: countdown) → ``enforcing`` (the controller saves, exports, acts) → ``acted``.

Thresholds fire once each per budget and period (the *arming key*): the fired set is
persisted by the controller, so a restart neither fires a threshold again nor skips one
crossed while the server was down (all newly crossed thresholds fire together, as one
event naming the highest). Raising a soft budget gives it a new key: thresholds above the
new share are armed again, those already below it are counted as fired.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Literal

from ...core.budget_timing import Countdown, Shortened, countdown, due
from ...core.i18n import N_

Kind = Literal["hard", "soft", "hub"]
Scope = Literal["session", "day", "month"]
SCOPES: tuple[Scope, ...] = ("session", "day", "month")
#: weakest first; ``terminate-instance`` only where the admin chose it (it deletes the
#: instance's local data): a user's own stop request cannot ask for it
ACTIONS = ("interrupt", "shutdown", "stop-server", "stop-instance", "terminate-instance")
USER_ACTIONS = ACTIONS[:-1]
DEFAULT_THRESHOLDS_PCT: tuple[int, ...] = (50, 80, 95)
#: the most a budget may be, so a typo of many zeros is refused rather than ignored
MAX_BUDGET_MICRO = 10**6 * 10**6


class BudgetError(ValueError):
    """A budget value that cannot be accepted; the message says what is accepted."""


class HardBudgetRefused(BudgetError):
    """A request that tries to set the hard budget (HTTP 403)."""


class BudgetCannotAct(BudgetError):
    """A budget asked for where no GPU is metered: it could never act (HTTP 409)."""


HARD_REFUSAL = N_(
    "the hard budget is set by the administrator (c.GpuCost.hard_budget_usd or "
    "GPUCOST_BUDGET_USD) and cannot be changed from JupyterLab"
)


@dataclass(frozen=True)
class Budget:
    kind: Kind
    amount_micro: int
    scope: Scope = "session"
    #: where a locked budget comes from, as the UI says it (``sources``, ``HUB_SOURCE_LABEL``)
    source: str = ""
    #: a hub budget's owner as the hub names it ("user" or "group:<name>")
    owner: str = ""

    @property
    def locked(self) -> bool:
        return self.kind != "soft"


@dataclass(frozen=True)
class Standing:
    """One budget against what was spent in its scope."""

    budget: Budget
    #: ``None``: the spend in this scope is not known (e.g. day/month without the ledger)
    spent_micro: int | None
    period: str

    @property
    def key(self) -> str:
        b = self.budget
        owner = f"{b.owner}:" if b.owner else ""
        return f"{b.kind}:{owner}{b.scope}:{self.period}:{b.amount_micro}"

    @property
    def remaining_micro(self) -> int | None:
        if self.spent_micro is None:
            return None
        return self.budget.amount_micro - self.spent_micro

    @property
    def share(self) -> float | None:
        if self.spent_micro is None:
            return None
        return self.spent_micro / self.budget.amount_micro

    @property
    def exceeded(self) -> bool:
        return self.spent_micro is not None and self.spent_micro >= (self.budget.amount_micro)

    def runs_out_at(self, now: datetime, rate_per_hour: Decimal) -> datetime | None:
        """When it is spent at ``rate``; ``now`` if it already is; ``None`` if never."""
        remaining = self.remaining_micro
        if remaining is None:
            return None
        if remaining <= 0:
            return now
        if rate_per_hour <= 0:
            return None
        hours = Decimal(remaining) / Decimal(1_000_000) / rate_per_hour
        return now + timedelta(seconds=float(hours * 3600))


# -- what the policy tells the controller ---------------------------------------------


@dataclass(frozen=True)
class ThresholdCrossed:
    standing: Standing
    #: the highest threshold just crossed (the one to show)
    threshold_pct: int
    #: every threshold crossed at this step (several after a restart or a jump)
    crossed_pct: tuple[int, ...]


@dataclass(frozen=True)
class GraceStarted:
    standing: Standing
    ends: datetime
    reason: str = "budget"


@dataclass(frozen=True)
class GraceCleared:
    """The budget is no longer spent (a soft budget was raised or removed)."""

    why: str


@dataclass(frozen=True)
class Enforce:
    """Grace is over: save, export, act. The controller calls ``acted()`` when done."""

    standing: Standing | None
    reason: str
    #: the action the user asked for (``None``: the configured one)
    action: str | None = None


#: why a countdown runs that the user started (and may cancel): "stop now", "when done"
USER_REASONS = ("user", "done")

PolicyEvent = ThresholdCrossed | GraceStarted | GraceCleared | Enforce

State = Literal["none", "ok", "warning", "grace", "enforcing", "acted"]


@dataclass
class BudgetPolicy:
    hard: Budget | None = None
    soft: Budget | None = None
    #: the hub service's budgets (the latest reply)
    hub: tuple[Budget, ...] = ()
    #: when the countdown must end because the hub stops the server (its ``stop_at``,
    #: less the time to save); ``None`` while the hub stops nothing
    deadline: datetime | None = None
    thresholds_pct: tuple[int, ...] = DEFAULT_THRESHOLDS_PCT
    grace_s: float = 120.0
    #: how often the controller checks (a countdown less than this short is not "shortened")
    tick_s: float = 1.0
    #: arming key → thresholds already fired (persisted by the controller)
    fired: dict[str, set[int]] = field(default_factory=dict)
    state: State = "none"
    grace_started: datetime | None = None
    grace_ends: datetime | None = None
    grace_standing: Standing | None = None
    grace_reason: str = "budget"
    #: why the countdown is shorter than ``grace_s`` (``core.budget_timing``); ``None``: it is not
    grace_shortened: Shortened | None = None
    #: the action the user asked for with ``request_stop`` (``None``: the configured one)
    grace_action: str | None = None
    #: the arming key the last enforcement was for: it is not enforced twice
    acted_key: str | None = None
    #: the arming key of a soft budget the user set with less than the grace left (it
    #: counts down the full grace, to be raised; any other budget spent acts at once)
    set_when_due: str | None = None

    def budgets(self) -> tuple[Budget, ...]:
        return (*(b for b in (self.hard, self.soft) if b is not None), *self.hub)

    # -- changes from the user ----------------------------------------------------

    def set_soft(
        self,
        budget: Budget | None,
        *,
        spent_micro: int | None = None,
        period: str = "",
        rate_per_hour: Decimal | None = None,
    ) -> None:
        """Set, change or remove the soft budget (never the hard one).

        Thresholds the new budget's share has already passed (``spent_micro`` in its
        scope now) count as fired: the user chose it knowing the spend; the ones above
        are armed. A budget set with less than the grace period left at the current rate
        (or below what is spent) counts down the full grace, for the user to raise it.
        """
        if budget is not None and budget.kind != "soft":
            raise BudgetError("only the soft budget can be changed")
        self.soft = budget
        if budget is None or spent_micro is None:
            return
        new = Standing(budget, spent_micro, period)
        left = budget.amount_micro - spent_micro
        rate = rate_per_hour if rate_per_hour is not None else Decimal(0)
        self.set_when_due = new.key if due(left, rate, self.grace_s) else None
        share_pct = 100 * spent_micro / budget.amount_micro
        self.fired.setdefault(new.key, set()).update(
            t for t in self.thresholds_pct if t <= share_pct
        )

    def stop_now(self, now: datetime) -> bool:
        """The user's "Save and stop now": end the grace period at once."""
        if self.state != "grace":
            return False
        self.grace_ends = now
        return True

    def request_stop(self, now: datetime, reason: str, action: str | None) -> GraceStarted | None:
        """The user's "stop the machine" / "stop when done": the same countdown, save and
        action as a spent budget (``None``: an action is being taken already)."""
        if self.state == "enforcing" or (
            self.state == "grace" and self.grace_reason not in USER_REASONS
        ):
            return None
        started = self._start_grace(now, None, reason)
        self.grace_action = action
        return started

    def cancel_stop(self) -> bool:
        """Cancel the user's own countdown (never a budget's)."""
        if self.state != "grace" or self.grace_reason not in USER_REASONS:
            return False
        self.cancel_grace()
        return True

    def acted(self) -> None:
        self.state = "acted"

    # -- one step ---------------------------------------------------------------------

    def evaluate(
        self,
        now: datetime,
        standings: Iterable[Standing],
        *,
        idle_for_s: float | None = None,
        idle_limit_s: float | None = None,
        kernels_running: bool = False,
        rate_per_hour: Decimal | None = None,
    ) -> list[PolicyEvent]:
        """Advance the machine with what was spent now; return what happened.

        ``rate_per_hour``: what the session costs now. A budget's countdown starts when
        the money left lasts at most the grace period at this rate, and ends when it is
        gone (``core.budget_timing``): the action lands at the budget. A rate that rises during the
        countdown shortens it; one that falls keeps it (it never ends later, so it never
        spends past the budget).

        After an action, a spent *hard* budget is enforced again when kernels run (the
        user started new ones): a new countdown, save and action. A spent soft budget is
        not: the user chose to go on.
        """
        standings = tuple(standings)
        rate = rate_per_hour if rate_per_hour is not None else Decimal(0)
        events: list[PolicyEvent] = []
        for standing in standings:
            events.extend(self._thresholds(standing))
        # the budgets whose countdown must run now for the action to land at them
        due_now = [
            s
            for s in standings
            if s.remaining_micro is not None and due(s.remaining_micro, rate, self.grace_s)
        ]
        binding = min(due_now, key=_hard_first) if due_now else None
        idle = idle_limit_s is not None and idle_for_s is not None and idle_for_s >= idle_limit_s
        hub_stop = self.deadline is not None

        if self.state in ("enforcing",):
            return events
        if self.state == "acted":
            if binding is None and not idle and not hub_stop:
                self.state = "ok"
                self.acted_key = None
            elif binding is not None and binding.key != self.acted_key:
                # a new period or budget that is spent again: start over
                self.state = "ok"
            elif kernels_running and (
                hub_stop or any(s.exceeded and s.budget.locked for s in standings)
            ):
                self.state = "ok"
            else:
                return events
        if self.state == "grace":
            counted = self.grace_standing
            # the budget counted down for is still there, unchanged (a rate that fell
            # keeps its countdown); raised, removed or a new period: it is not
            same = counted is not None and any(s.key == counted.key for s in standings)
            still = (
                binding is not None
                or (self.grace_reason == "budget" and same)
                or (self.grace_reason == "idle" and idle)
                or (self.grace_reason == "hub" and hub_stop)
                or self.grace_reason in USER_REASONS
            )
            if still and self.deadline is not None and self.grace_started is not None:
                # the hub's stop time came or moved while the countdown ran
                ends = self._grace_end(now, self.grace_started, binding, self.grace_s)
                self.grace_ends = ends if self.grace_ends is None else min(self.grace_ends, ends)
            if not still:
                why = (
                    N_("the hub no longer stops this server")
                    if self.grace_reason == "hub"
                    else N_("the budget is no longer spent")
                )
                self.cancel_grace()
                events.append(GraceCleared(why))
            else:
                if binding is not None:
                    self._keep_to_budget(now, binding, rate)
                    self.grace_standing = binding
                self._end_if_over(now, events)
                return events
        if binding is not None:
            length = self._countdown(binding, rate)
            events.append(self._start_grace(now, binding, "budget", length))
            self._end_if_over(now, events)
        elif hub_stop:
            events.append(self._start_grace(now, None, "hub"))
        elif idle:
            events.append(self._start_grace(now, None, "idle"))
        elif not standings:
            self.state = "none"
        elif any(self.fired.get(s.key) for s in standings):
            self.state = "warning"
        else:
            self.state = "ok"
        return events

    def _end_if_over(self, now: datetime, events: list[PolicyEvent]) -> None:
        """The countdown is over: act (in the same check that found it over)."""
        if self.state != "grace" or self.grace_ends is None or now < self.grace_ends:
            return
        self.state = "enforcing"
        if self.grace_reason not in USER_REASONS:
            # a stop the user asked for leaves the budgets' own record as it was
            self.acted_key = self.grace_standing.key if self.grace_standing else None
        events.append(Enforce(self.grace_standing, self.grace_reason, self.grace_action))

    def _countdown(self, standing: Standing, rate: Decimal) -> Countdown | None:
        """The countdown to the budget (``core.budget_timing``); ``None``: the full grace (a soft
        budget set with less than a grace left, to be raised; the hub's own stop time)."""
        if standing.budget.kind == "hub" and self.deadline is not None:
            return None
        if not standing.budget.locked and standing.key == self.set_when_due:
            return None
        return countdown(standing.remaining_micro or 0, rate, self.grace_s, tick_s=self.tick_s)

    def _keep_to_budget(self, now: datetime, standing: Standing, rate: Decimal) -> None:
        """A rate that rose during the countdown: it ends when the money does (never later
        than it would have)."""
        length = self._countdown(standing, rate)
        if length is None or self.grace_ends is None or self.grace_started is None:
            return
        ends = now + timedelta(seconds=length.seconds)
        if ends < self.grace_ends:
            self.grace_ends = ends
            if (ends - self.grace_started).total_seconds() < self.grace_s - self.tick_s:
                self.grace_shortened = "overrun"

    def _start_grace(
        self,
        now: datetime,
        standing: Standing | None,
        reason: str,
        length: Countdown | None = None,
    ) -> GraceStarted:
        self.state = "grace"
        self.grace_started = now
        self.grace_standing = standing
        self.grace_reason = reason
        self.grace_shortened = None if length is None else length.shortened
        seconds = self.grace_s if length is None else length.seconds
        self.grace_ends = self._grace_end(now, now, standing, seconds)
        return GraceStarted(standing, self.grace_ends, reason)  # type: ignore[arg-type]

    def _grace_end(
        self, now: datetime, started: datetime, standing: Standing | None, seconds: float
    ) -> datetime:
        """The countdown's end: ``seconds`` after it started; for the hub's budget or stop,
        the hub's time (``deadline``); never after the hub's time."""
        local = started + timedelta(seconds=seconds)
        if self.deadline is None:
            return local
        hub = max(now, self.deadline)
        for_hub = (standing is None and self.grace_reason == "hub") or (
            standing is not None and standing.budget.kind == "hub"
        )
        return hub if for_hub else min(local, hub)

    def cancel_grace(self) -> None:
        """End the countdown without acting (the budget is no longer spent, or the idle
        stop was skipped because a kernel became busy)."""
        self.state = "ok"
        self.grace_started = self.grace_ends = None
        self.grace_standing = None
        self.grace_reason = "budget"
        self.grace_shortened = None
        self.grace_action = None

    def _thresholds(self, standing: Standing) -> list[PolicyEvent]:
        share = standing.share
        if share is None:
            return []
        fired = self.fired.setdefault(standing.key, set())
        crossed = tuple(t for t in self.thresholds_pct if t not in fired and 100 * share >= t)
        if not crossed:
            return []
        fired.update(crossed)
        return [ThresholdCrossed(standing, max(crossed), crossed)]

    def snapshot_fired(self) -> dict[str, list[int]]:
        return {k: sorted(v) for k, v in self.fired.items() if v}

    def restore_fired(self, fired: Mapping[str, Iterable[int]]) -> None:
        self.fired = {str(k): {int(t) for t in v} for k, v in fired.items()}


def _hard_first(standing: Standing) -> tuple[int, int]:
    remaining = standing.remaining_micro or 0
    return (remaining, 0 if standing.budget.locked else 1)


def binding_standing(standings: Iterable[Standing]) -> Standing | None:
    """The budget that binds: the one with the least money left, of those whose spend is
    known (``None``: none is)."""
    known = [s for s in standings if s.remaining_micro is not None]
    return min(known, key=lambda s: s.remaining_micro or 0) if known else None
