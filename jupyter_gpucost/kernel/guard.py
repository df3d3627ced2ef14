"""A budget guard for training loops.

::

    from jupyter_gpucost import guard

    with guard(budget_usd=5, total_steps=30_000, on_stop=save_checkpoint) as g:
        for batch in loader:
            loss = train_step(batch)
            g.step(tokens=batch.numel())

The guard prices the time the loop holds the kernel's GPUs (all of them, plus the
instance's base price, at the prices the kernel uses for ``%%gpucost``). After
``warmup_steps`` steps it projects the loop's total cost and end time from the measured
step rate and warns once (:class:`BudgetWarning`) when the projection is over the budget.
Before each new step would take the spend over the budget it calls ``on_stop(guard)`` (to
save a checkpoint) and raises :class:`BudgetExceeded`, so the loop stops before the money
is spent.

Money is exact: prices are Decimals and time is counted in integer microseconds.
Nothing here imports torch (it is used, when the loop already imported it and CUDA is
initialised, to synchronise the GPU before the few timings the projection rests on) or
IPython (used, when running in IPython, to show the live line).

This module owns the guard's arithmetic (the spend, the step rate, the projection) and
its stop; what it reports is in :mod:`.training.summary` and how it shows itself in
:mod:`.training.display`. The module itself is callable: ``guard(...)`` makes a :class:`Guard`.
"""

from __future__ import annotations

import sys
import time
import types
import warnings
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from types import TracebackType
from typing import TypeAlias

from ..core.billing import US_PER_HOUR, US_PER_S
from ..core.i18n import _
from ..core.money import MICRO, guard_line, round_units
from .cell.cuda import torch_cuda
from .training.display import LiveLine, show_warning
from .training.interrupt import InterruptWatch, MachineInterrupted, interrupted_message
from .training.old_names import DollarNames
from .training.summary import BudgetExceeded, BudgetWarning, GuardSummary

#: "one more step" is priced at the slowest of this many recent steps (or the mean, if
#: that is more), so a step slower than the average does not go over the budget
RECENT_STEPS = 20

NANO = Decimal("0.000000001")

#: an amount of dollars as a user writes it (a string keeps every digit)
Dollars: TypeAlias = float | int | str | Decimal
#: called with the guard when it stops the loop (to save a checkpoint); its result is unused
OnStop: TypeAlias = "Callable[[Guard], object]"
#: called with the guard when the cloud takes the machine back (to save a checkpoint); a
#: path it returns is exported with the checkpoints (docs/spot.md)
OnInterrupt: TypeAlias = "Callable[[Guard], object]"


def _money(value: object, what: str) -> Decimal:
    not_money = _("{what} must be a number of dollars, not {value}")
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ValueError(not_money.format(what=what, value=repr(value)))
    try:
        money = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(not_money.format(what=what, value=repr(value))) from None
    if not money.is_finite():
        text = _("{what} must be a finite number of dollars, not {value}")
        raise ValueError(text.format(what=what, value=repr(value)))
    return money


def _count(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        text = _("{what} must be a whole number, not {value}")
        raise ValueError(text.format(what=what, value=repr(value)))
    if value < minimum:
        text = _("{what} must be at least {minimum}, not {value}")
        raise ValueError(text.format(what=what, minimum=minimum, value=value))
    return value


class Guard(DollarNames):
    """See the module's documentation. Use it as a context manager."""

    def __init__(
        self,
        budget_usd: Dollars,
        total_steps: int,
        *,
        warmup_steps: int = 20,
        on_stop: OnStop | None = None,
        display: bool = True,
        usd_per_hour: Dollars | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] | None = None,
        stop_when_done: str | None = None,
        on_interrupt: OnInterrupt | None = None,
    ) -> None:
        from .link import follow_server_language

        follow_server_language()  # the guard's lines in the kernel's language
        budget = _money(budget_usd, "budget_usd")
        if budget <= 0:
            text = _("{what} must be more than 0, not {value}")
            raise ValueError(text.format(what="budget_usd", value=repr(budget_usd)))
        self.total_steps = _count(total_steps, "total_steps", 1)
        self.warmup_steps = _count(warmup_steps, "warmup_steps", 1)
        if on_stop is not None and not callable(on_stop):
            raise ValueError(
                _("on_stop must be a function taking the guard, not {value}").format(
                    value=repr(on_stop)
                )
            )
        if on_interrupt is not None and not callable(on_interrupt):
            raise ValueError(
                _("on_interrupt must be a function taking the guard, not {value}").format(
                    value=repr(on_interrupt)
                )
            )
        self.budget = budget
        self.on_stop = on_stop
        self.on_interrupt = on_interrupt
        self._interrupt = InterruptWatch()
        #: the action asked of the server when the loop ends, finished, failed or stopped
        #: by the budget (``"stop-instance"``...; ``None``: nothing)
        self.stop_when_done = stop_when_done
        self.display = display
        self.currency_symbol = "$"
        self.price_source = ""
        if usd_per_hour is not None:
            rate = _money(usd_per_hour, "usd_per_hour")
            if rate < 0:
                text = _("{what} cannot be negative, not {value}")
                raise ValueError(text.format(what="usd_per_hour", value=repr(usd_per_hour)))
            self.per_hour = rate
            self.price_source = _("usd_per_hour given to the guard")
        else:
            from .cell.measure import prices

            p = prices()
            self.per_hour = p.rate_per_hour()
            self.currency_symbol = p.currency_symbol
            self.price_source = p.source
        self._clock = clock
        self._wall_clock = wall_clock or (lambda: datetime.now().astimezone())
        self._budget_micro = Fraction(self.budget) * 1_000_000
        # micro-dollars per microsecond of held GPU time
        self._micro_per_us = Fraction(self.per_hour) * 1_000_000 / US_PER_HOUR
        self._t0_us: int | None = None
        self._end_us: int | None = None
        self._first_us: int | None = None  # when the first step ended
        self._last_us: int | None = None
        self._recent_us: deque[int] = deque(maxlen=RECENT_STEPS)
        self._first_tokens = 0
        self._tokens = 0
        self._tokens_given = False
        self.steps = 0
        self.warned = False
        self.stopped = False
        self._line = LiveLine(clock)
        self._synced_projection = False

    # -- the loop ---------------------------------------------------------------------

    def __enter__(self) -> Guard:
        if self._t0_us is not None:
            raise RuntimeError(_("this guard was already used; make a new one for a new loop"))
        self._t0_us = self._now_us()
        if self.on_interrupt is not None:
            self._interrupt.register()
        self._show(force=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._t0_us is not None and self._end_us is None:
            self._end_us = self._now_us()
        self._interrupt.unregister()
        self._show(force=True)
        if self.stop_when_done is not None:
            from .link import LinkError
            from .stop_when_done import request_stop

            try:
                print(request_stop(self.stop_when_done))
            except LinkError as e:
                print(_("gpucost: could not ask the server to stop: {error}").format(error=e))
        return None

    def step(self, tokens: int | None = None) -> None:
        """Mark the end of one training step (``tokens``: how many it processed).

        Raises :class:`BudgetExceeded` (after calling ``on_stop``) when one more step at
        the measured rate would take the spend over the budget.
        """
        if self._t0_us is None or self._end_us is not None:
            raise RuntimeError(_("g.step() belongs inside `with guard(...) as g:`"))
        if self.stopped:
            raise BudgetExceeded(self._stop_message(), self.summary())
        if self.on_interrupt is not None:
            self._check_interruption()
        if tokens is not None:
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
                text = _("{what} must be a whole number >= 0, not {value}")
                raise ValueError(text.format(what="tokens", value=repr(tokens)))
            self._tokens_given = True
        self.steps += 1
        # the first step and the step the projection starts from are timed once the GPU
        # has finished its queued work, so the step rate is not read off launches alone
        projecting = self.steps >= self._warmup and not self._synced_projection
        if self.steps == 1 or projecting:
            self._synchronize()
            self._synced_projection = self._synced_projection or projecting
        now = self._now_us()
        if self._last_us is not None:
            self._recent_us.append(now - self._last_us)
        self._last_us = now
        if self.steps == 1:
            self._first_us = now
            self._first_tokens = tokens or 0
        self._tokens += tokens or 0

        projected = self._projected_micro()
        if projected is not None and not self.warned and projected > self._budget_micro:
            self.warned = True
            self._warn()
        next_step = self._next_step_micro()
        if next_step is not None and self._spent_micro(now) + next_step > self._budget_micro:
            self.stopped = True
            self._show(force=True)
            if self.on_stop is not None:
                self.on_stop(self)
            raise BudgetExceeded(self._stop_message(), self.summary())
        self._show()

    def _check_interruption(self) -> None:
        """The server's notice came: checkpoint through ``on_interrupt``, answer, stop."""
        notice = self._interrupt.notice()
        if notice is None or self.on_interrupt is None:
            return
        self._end_us = self._now_us()
        try:
            checkpoint = self.on_interrupt(self)
        except Exception as e:
            self._interrupt.answer(None, f"{type(e).__name__}: {e}")
            raise
        path = self._interrupt.answer(checkpoint, None)
        raise MachineInterrupted(
            interrupted_message(notice, path), str(notice.get("deadline", "")), path
        )

    # -- figures ----------------------------------------------------------------------

    @property
    def _warmup(self) -> int:
        return min(self.warmup_steps, self.total_steps)

    def _now_us(self) -> int:
        return round(self._clock() * US_PER_S)

    def _elapsed_us(self, now: int | None = None) -> int:
        if self._t0_us is None:
            return 0
        end = self._end_us if self._end_us is not None else (now or self._now_us())
        return end - self._t0_us

    def _spent_micro(self, now: int | None = None) -> Fraction:
        return self._micro_per_us * self._elapsed_us(now)

    def _window(self) -> tuple[int, int, int] | None:
        """(microseconds, steps, tokens) the step rate is measured over."""
        if self._t0_us is None or self._last_us is None or self.steps == 0:
            return None
        if self.steps >= 2 and self._first_us is not None:
            # leave out the first step: it includes compilation and warm-up
            return (
                self._last_us - self._first_us,
                self.steps - 1,
                self._tokens - self._first_tokens,
            )
        return self._last_us - self._t0_us, self.steps, self._tokens

    def _us_per_step(self) -> Fraction | None:
        window = self._window()
        if window is None:
            return None
        us, steps, _ = window
        return Fraction(max(us, 0), steps)

    def _per_step_micro(self) -> Fraction | None:
        us = self._us_per_step()
        return None if us is None else self._micro_per_us * us

    def _next_step_micro(self) -> Fraction | None:
        """What one more step may cost: the slowest recent step, or the mean if more."""
        mean = self._us_per_step()
        if mean is None:
            return None
        slowest = max(self._recent_us, default=0)
        return self._micro_per_us * max(mean, Fraction(slowest))

    def _projected_us(self) -> Fraction | None:
        """Microseconds from the guard's start to the loop's projected end."""
        us = self._us_per_step()
        if us is None or self.steps < self._warmup or self._last_us is None:
            return None
        assert self._t0_us is not None
        remaining = max(self.total_steps - self.steps, 0)
        return (self._last_us - self._t0_us) + remaining * us

    def _projected_micro(self) -> Fraction | None:
        us = self._projected_us()
        return None if us is None else self._micro_per_us * us

    @property
    def spent(self) -> Decimal:
        """What the guarded time has cost so far (until the ``with`` block ended)."""
        return round_units(self._spent_micro(), MICRO)

    @property
    def projected(self) -> Decimal | None:
        """The whole loop's projected cost, once ``warmup_steps`` steps are done."""
        value = self._projected_micro()
        return None if value is None else round_units(value, MICRO)

    @property
    def projected_end(self) -> datetime | None:
        """When the loop is projected to end (local time, timezone-aware)."""
        us = self._us_per_step()
        if self._projected_us() is None or us is None or self._last_us is None:
            return None
        remaining = max(self.total_steps - self.steps, 0)
        last_wall = self._wall_clock() - timedelta(microseconds=self._now_us() - self._last_us)
        return last_wall + timedelta(microseconds=float(remaining * us))

    @property
    def seconds_per_step(self) -> float | None:
        us = self._us_per_step()
        return None if us is None else float(us) / US_PER_S

    @property
    def per_step(self) -> Decimal | None:
        value = self._per_step_micro()
        return None if value is None else round_units(value, NANO)

    @property
    def per_1k_tokens(self) -> Decimal | None:
        window = self._window()
        if not self._tokens_given or window is None or window[2] <= 0:
            return None
        us, _, tokens = window
        return round_units(self._micro_per_us * us * 1000 / tokens, NANO)

    def summary(self) -> GuardSummary:
        return GuardSummary(
            steps=self.steps,
            total_steps=self.total_steps,
            elapsed_s=self._elapsed_us() / US_PER_S,
            per_hour=self.per_hour,
            budget=self.budget,
            spent=self.spent,
            seconds_per_step=self.seconds_per_step,
            per_step=self.per_step,
            per_1k_tokens=self.per_1k_tokens,
            projected=self.projected,
            projected_end=self.projected_end,
            warned=self.warned,
            stopped=self.stopped,
            currency_symbol=self.currency_symbol,
        )

    def __repr__(self) -> str:
        return str(self.summary())

    # -- showing ----------------------------------------------------------------------

    def _stop_message(self) -> str:
        sym = self.currency_symbol
        next_step = self._next_step_micro()
        per_step = Decimal(0) if next_step is None else round_units(next_step, NANO)
        text = _(
            "stopped after step {n} of {total}: {spent} spent, and one more step ({step}) "
            "would go over the budget of {budget}"
        )
        return text.format(
            n=f"{self.steps:,}",
            total=f"{self.total_steps:,}",
            spent=f"{sym}{guard_line(self.spent)}",
            step=f"{sym}{guard_line(per_step)}",
            budget=f"{sym}{guard_line(self.budget)}",
        )

    def _warn(self) -> None:
        sym = self.currency_symbol
        projected = self.projected or Decimal(0)
        message = _(
            "the loop is projected to cost {cost} for {total} steps, over its budget of "
            "{budget}: it will be stopped before the budget is spent"
        ).format(
            cost=f"{sym}{guard_line(projected)}",
            total=f"{self.total_steps:,}",
            budget=f"{sym}{guard_line(self.budget)}",
        )
        warnings.warn(message, BudgetWarning, stacklevel=3)
        if self.display:
            show_warning(message)

    def _show(self, force: bool = False) -> None:
        if self.display:
            self._line.show(
                lambda: self.summary().line(), force=force, measuring=self.steps < self._warmup
            )

    @staticmethod
    def _synchronize() -> None:
        torch = torch_cuda()
        if torch is None:
            return
        for i in range(torch.cuda.device_count()):
            torch.cuda.synchronize(i)


def guard(
    budget_usd: Dollars,
    total_steps: int,
    *,
    warmup_steps: int = 20,
    on_stop: OnStop | None = None,
    display: bool = True,
    usd_per_hour: Dollars | None = None,
    stop_when_done: str | None = None,
    on_interrupt: OnInterrupt | None = None,
) -> Guard:
    """A :class:`Guard` for a loop of ``total_steps`` steps and a budget in USD; with
    ``stop_when_done="stop-instance"`` the server stops the machine when the loop ends."""
    return Guard(
        budget_usd,
        total_steps,
        warmup_steps=warmup_steps,
        on_stop=on_stop,
        display=display,
        usd_per_hour=usd_per_hour,
        stop_when_done=stop_when_done,
        on_interrupt=on_interrupt,
    )


class _CallableModule(types.ModuleType):
    """``from jupyter_gpucost import guard`` gives this module; calling it makes a Guard."""

    __call__ = staticmethod(guard)


sys.modules[__name__].__class__ = _CallableModule

__all__ = [
    "BudgetExceeded",
    "BudgetWarning",
    "Guard",
    "GuardSummary",
    "MachineInterrupted",
    "guard",
]
