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
"""

from __future__ import annotations

import sys
import time
import types
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from ..core.billing import US_PER_HOUR, US_PER_S
from ..core.money import MICRO, guard_line, round_usd

#: the live line is redrawn at most this often (seconds)
DISPLAY_EVERY_S = 1.0
#: outside IPython, a progress line is printed at most this often (seconds)
PRINT_EVERY_S = 30.0
#: "one more step" is priced at the slowest of this many recent steps (or the mean, if
#: that is more), so a step slower than the average does not go over the budget
RECENT_STEPS = 20

NANO = Decimal("0.000000001")


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
class GuardSummary:
    """The guard's figures at one moment. Money in USD (exact Decimals)."""

    steps: int
    total_steps: int
    elapsed_s: float
    usd_per_hour: Decimal
    budget_usd: Decimal
    spent_usd: Decimal
    #: measured seconds per step (the first step left out once there are two or more)
    seconds_per_step: float | None
    usd_per_step: Decimal | None
    usd_per_1k_tokens: Decimal | None
    #: the whole loop's cost and end, projected once ``warmup_steps`` steps are done
    projected_usd: Decimal | None
    projected_end: datetime | None
    warned: bool
    stopped: bool
    currency_symbol: str = "$"

    def line(self) -> str:
        """One line for the live display."""
        sym = self.currency_symbol
        parts = [
            f"step {self.steps:,}/{self.total_steps:,}",
            f"{sym}{guard_line(self.spent_usd)} spent of {sym}{guard_line(self.budget_usd)}",
        ]
        if self.usd_per_step is not None:
            parts.append(f"{sym}{guard_line(self.usd_per_step)}/step")
        if self.usd_per_1k_tokens is not None:
            parts.append(f"{sym}{guard_line(self.usd_per_1k_tokens)}/1k tokens")
        if self.projected_usd is not None and self.projected_end is not None:
            over = " (over budget)" if self.projected_usd > self.budget_usd else ""
            ends = "" if self.stopped else f", ends {_when(self.projected_end)}"
            parts.append(f"projected {sym}{guard_line(self.projected_usd)}{over}{ends}")
        elif self.steps < self.total_steps and not self.stopped:
            parts.append("measuring the step rate")
        if self.usd_per_hour == 0:
            parts.append("rate 0/h: no priced GPU here")
        if self.stopped:
            parts.append("stopped before the budget ran out")
        return " · ".join(parts)

    def __str__(self) -> str:
        sym = self.currency_symbol
        rows = [
            ("steps", f"{self.steps:,} of {self.total_steps:,}"),
            ("time", f"{self.elapsed_s:.1f} s"),
            ("rate", f"{sym}{self.usd_per_hour}/h"),
            ("spent", f"{sym}{self.spent_usd} of {sym}{self.budget_usd}"),
        ]
        if self.seconds_per_step is not None:
            rows.append(("per step", f"{self.seconds_per_step:.4f} s, {sym}{self.usd_per_step}"))
        if self.usd_per_1k_tokens is not None:
            rows.append(("per 1k tokens", f"{sym}{self.usd_per_1k_tokens}"))
        if self.projected_usd is not None and self.projected_end is not None:
            rows.append(
                (
                    "projected",
                    f"{sym}{self.projected_usd}, ends {self.projected_end:%Y-%m-%d %H:%M:%S}",
                )
            )
        if self.stopped:
            rows.append(("stopped", "one more step would have gone over the budget"))
        return "guard\n" + "\n".join(f"  {k}: {v}" for k, v in rows)


def _when(moment: datetime) -> str:
    now = datetime.now(moment.tzinfo)
    left = max(0.0, (moment - now).total_seconds())
    if left < 90:
        return f"{moment:%H:%M:%S} (in {left:.0f} s)"
    if left < 90 * 60:
        return f"{moment:%H:%M} (in {left / 60:.0f} min)"
    if left < 48 * 3600:
        return f"{moment:%H:%M} (in {left / 3600:.1f} h)"
    return f"{moment:%Y-%m-%d %H:%M} (in {left / 86400:.1f} days)"


def _money(value: object, what: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ValueError(f"{what} must be a number of dollars, not {value!r}")
    try:
        money = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"{what} must be a number of dollars, not {value!r}") from None
    if not money.is_finite():
        raise ValueError(f"{what} must be a finite number of dollars, not {value!r}")
    return money


def _count(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be a whole number, not {value!r}")
    if value < minimum:
        raise ValueError(f"{what} must be at least {minimum}, not {value}")
    return value


def _torch_cuda() -> Any:
    """torch, when the loop imported it and CUDA is initialised; never imports it."""
    from .measure import _torch_cuda as torch_cuda

    return torch_cuda()


def _in_ipython() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        return ipython.get_ipython() is not None
    except Exception:
        return False


class _Html:
    """Text and HTML for one displayed line."""

    def __init__(self, text: str, warning: bool = False) -> None:
        self.text = text
        self.warning = warning

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        from html import escape

        style = "color:var(--jp-warn-color0,#b45309);" if self.warning else ""
        # tex2jax_ignore: the dollar amounts must not be typeset as LaTeX by JupyterLab
        return (
            f"<div class='jp-gpucost-guard tex2jax_ignore mathjax_ignore' style='{style}'>"
            f"{escape(self.text)}</div>"
        )


class Guard:
    """See the module's documentation. Use it as a context manager."""

    def __init__(
        self,
        budget_usd: float | int | str | Decimal,
        total_steps: int,
        *,
        warmup_steps: int = 20,
        on_stop: Callable[[Guard], Any] | None = None,
        display: bool = True,
        usd_per_hour: float | int | str | Decimal | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] | None = None,
    ) -> None:
        budget = _money(budget_usd, "budget_usd")
        if budget <= 0:
            raise ValueError(f"budget_usd must be more than 0, not {budget_usd!r}")
        self.total_steps = _count(total_steps, "total_steps", 1)
        self.warmup_steps = _count(warmup_steps, "warmup_steps", 1)
        if on_stop is not None and not callable(on_stop):
            raise ValueError(f"on_stop must be a function taking the guard, not {on_stop!r}")
        self.budget_usd = budget
        self.on_stop = on_stop
        self.display = display
        self.currency_symbol = "$"
        self.price_source = ""
        if usd_per_hour is not None:
            rate = _money(usd_per_hour, "usd_per_hour")
            if rate < 0:
                raise ValueError(f"usd_per_hour cannot be negative, not {usd_per_hour!r}")
            self.usd_per_hour = rate
            self.price_source = "usd_per_hour given to the guard"
        else:
            from .measure import prices

            p = prices()
            self.usd_per_hour = p.rate_usd_per_hour()
            self.currency_symbol = p.currency_symbol
            self.price_source = p.source
        self._clock = clock
        self._wall_clock = wall_clock or (lambda: datetime.now().astimezone())
        self._budget_micro = Fraction(self.budget_usd) * 1_000_000
        # micro-dollars per microsecond of held GPU time
        self._micro_per_us = Fraction(self.usd_per_hour) * 1_000_000 / US_PER_HOUR
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
        self._handle: Any = None
        self._shown_at = -1e18
        self._last_line = ""
        self._synced_projection = False

    # -- the loop ---------------------------------------------------------------------

    def __enter__(self) -> Guard:
        if self._t0_us is not None:
            raise RuntimeError("this guard was already used; make a new one for a new loop")
        self._t0_us = self._now_us()
        self._show(force=True)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._t0_us is not None and self._end_us is None:
            self._end_us = self._now_us()
        self._show(force=True)
        return None

    def step(self, tokens: int | None = None) -> None:
        """Mark the end of one training step (``tokens``: how many it processed).

        Raises :class:`BudgetExceeded` (after calling ``on_stop``) when one more step at
        the measured rate would take the spend over the budget.
        """
        if self._t0_us is None or self._end_us is not None:
            raise RuntimeError("g.step() belongs inside `with guard(...) as g:`")
        if self.stopped:
            raise BudgetExceeded(self._stop_message(), self.summary())
        if tokens is not None:
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
                raise ValueError(f"tokens must be a whole number >= 0, not {tokens!r}")
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
    def spent_usd(self) -> Decimal:
        """What the guarded time has cost so far (until the ``with`` block ended)."""
        return round_usd(self._spent_micro(), MICRO)

    @property
    def projected_usd(self) -> Decimal | None:
        """The whole loop's projected cost, once ``warmup_steps`` steps are done."""
        value = self._projected_micro()
        return None if value is None else round_usd(value, MICRO)

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
    def usd_per_step(self) -> Decimal | None:
        value = self._per_step_micro()
        return None if value is None else round_usd(value, NANO)

    @property
    def usd_per_1k_tokens(self) -> Decimal | None:
        window = self._window()
        if not self._tokens_given or window is None or window[2] <= 0:
            return None
        us, _, tokens = window
        return round_usd(self._micro_per_us * us * 1000 / tokens, NANO)

    def summary(self) -> GuardSummary:
        return GuardSummary(
            steps=self.steps,
            total_steps=self.total_steps,
            elapsed_s=self._elapsed_us() / US_PER_S,
            usd_per_hour=self.usd_per_hour,
            budget_usd=self.budget_usd,
            spent_usd=self.spent_usd,
            seconds_per_step=self.seconds_per_step,
            usd_per_step=self.usd_per_step,
            usd_per_1k_tokens=self.usd_per_1k_tokens,
            projected_usd=self.projected_usd,
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
        per_step = Decimal(0) if next_step is None else round_usd(next_step, NANO)
        return (
            f"stopped after step {self.steps:,} of {self.total_steps:,}: "
            f"{sym}{guard_line(self.spent_usd)} spent, and one more step "
            f"({sym}{guard_line(per_step)}) would go over the budget of "
            f"{sym}{guard_line(self.budget_usd)}"
        )

    def _warn(self) -> None:
        sym = self.currency_symbol
        projected = self.projected_usd or Decimal(0)
        message = (
            f"the loop is projected to cost {sym}{guard_line(projected)} for "
            f"{self.total_steps:,} steps, over its budget of {sym}{guard_line(self.budget_usd)}: "
            "it will be stopped before the budget is spent"
        )
        warnings.warn(message, BudgetWarning, stacklevel=3)
        if not self.display:
            return
        if _in_ipython():
            from IPython.display import display

            display(_Html(f"budget warning: {message}", warning=True))
        else:
            print(f"jupyter-gpucost: budget warning: {message}", flush=True)

    def _show(self, force: bool = False) -> None:
        if not self.display:
            return
        now = self._clock()
        ipython = _in_ipython()
        every = DISPLAY_EVERY_S if ipython else PRINT_EVERY_S
        if not force and now - self._shown_at < every:
            return
        if not ipython and not force and self.steps < self._warmup:
            return
        self._shown_at = now
        line = self.summary().line()
        if line == self._last_line:
            return
        self._last_line = line
        if ipython:
            from IPython.display import display

            if self._handle is None:
                self._handle = display(_Html(line), display_id=True)
            else:
                self._handle.update(_Html(line))
        else:
            print(f"jupyter-gpucost: {line}", flush=True)

    @staticmethod
    def _synchronize() -> None:
        torch = _torch_cuda()
        if torch is None:
            return
        for i in range(torch.cuda.device_count()):
            torch.cuda.synchronize(i)


def guard(
    budget_usd: float | int | str | Decimal,
    total_steps: int,
    *,
    warmup_steps: int = 20,
    on_stop: Callable[[Guard], Any] | None = None,
    display: bool = True,
    usd_per_hour: float | int | str | Decimal | None = None,
) -> Guard:
    """A :class:`Guard` for a loop of ``total_steps`` steps and a budget in USD."""
    return Guard(
        budget_usd,
        total_steps,
        warmup_steps=warmup_steps,
        on_stop=on_stop,
        display=display,
        usd_per_hour=usd_per_hour,
    )


class _CallableModule(types.ModuleType):
    """``from jupyter_gpucost import guard`` gives this module; calling it makes a Guard."""

    def __call__(self, *args: Any, **kwargs: Any) -> Guard:
        return guard(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["BudgetExceeded", "BudgetWarning", "Guard", "GuardSummary", "guard"]
