"""A headless run's budget, held by the runner itself: it meters the run, and stops it.

The runner does not wait for the notebook to say what it costs: :class:`RunMeter` prices
the run's wall time (from the first code sent to the kernel) at the machine's rate (the
GPUs the runner sees, priced as the kernel prices them), whatever the notebook's code
publishes or switches off (``%gpucost auto off``). The cells' records only split that cost
among the cells; they never make the run cheaper.

A budget is a cap: :class:`BudgetWatch` stops the kernel in steps, each with a deadline,
saving the notebook before each one, and starts them early enough that, at the run's
metered rate, the last step lands when the money runs out:

1. **interrupt** (SIGINT to the kernel's process group, as *Kernel → Interrupt* does), and
   wait for the running cell to end;
2. **shutdown** (the protocol's ``shutdown_request`` on the control channel), and wait for
   the kernel to exit;
3. **kill** (SIGKILL to the kernel's process group), at the budget.

So the steps begin once the money left lasts the interrupt's and the shutdown's deadlines
together (``--stop-grace`` each) at the rate
(:func:`~jupyter_gpucost.core.budget_timing.due`); a cell that ends at the interrupt ends
the run that much before the budget. Where the money left lasts less than that (a budget
smaller than the steps' cost, or one a cell's record brought closer), both deadlines are
shortened in proportion, so the kill still lands at the budget, and the run says why
(:attr:`BudgetWatch.plan`).

A cell that swallows ``KeyboardInterrupt`` in a loop is so stopped anyway. The steps run on
the client's own event loop (the kernel manager is not thread-safe); the watcher thread
only times them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from ..core.billing import cost_micro
from ..core.budget_timing import Shortened, countdown, due
from ..core.money import round_micro
from .collect import CostCollector

#: how often the watcher looks at the run's cost
WATCH_INTERVAL_S = 0.1
#: the escalation's steps, in order (their names are kept in the notebook's summary)
STEPS = ("interrupt", "shutdown", "kill")


@dataclass(frozen=True)
class Deadlines:
    """How long each step may take before the next: a cell to end after the interrupt, the
    kernel to exit after the shutdown request, the process to go after SIGKILL."""

    interrupt_s: float = 10.0
    shutdown_s: float = 10.0
    kill_s: float = 5.0


class RunMeter:
    """The run's cost as the runner meters it: wall time since the run began × the rate."""

    def __init__(self, rate_per_hour: Decimal, clock: Callable[[], float] = time.monotonic):
        self.rate = rate_per_hour
        self.clock = clock
        self.started: float | None = None
        self.ended: float | None = None
        #: when the last cell ended (the run's end, if no cell runs after it)
        self.last_lap: float | None = None

    def start(self) -> None:
        if self.started is None:
            self.started = self.clock()

    def lap(self) -> None:
        """A cell ended."""
        self.last_lap = self.clock()

    def stop(self, *, at_last_lap: bool = False) -> None:
        """The run's compute ended (now, or when its last cell ended: the kernel's shutdown
        and the notebook's saving after it are not the run's)."""
        if self.started is None or self.ended is not None:
            return
        self.ended = self.last_lap if at_last_lap and self.last_lap is not None else self.clock()

    def wall_s(self) -> float:
        if self.started is None:
            return 0.0
        return max(0.0, (self.ended if self.ended is not None else self.clock()) - self.started)

    def cost_micro(self) -> int:
        return round_micro(cost_micro(self.rate, round(self.wall_s() * 1_000_000)))


def run_cost_micro(collector: CostCollector, meter: RunMeter) -> int:
    """The run's cost: the meter's, or the cells' records if they say more (never less)."""
    return max(meter.cost_micro(), collector.summary.total_micro_usd)


@dataclass(frozen=True)
class StopPlan:
    """When the steps began and how long they may take, so the kill lands at the budget."""

    #: the money left when the steps began
    remaining_micro: int
    rate_per_hour: Decimal
    #: the interrupt's and the shutdown's deadlines as they run (shortened, where needed)
    deadlines: Deadlines
    #: the steps' full length (``--stop-grace`` twice), and theirs now
    grace_s: float
    countdown_s: float
    #: why ``countdown_s`` is shorter than ``grace_s`` (``None``: it is not)
    shortened: Shortened | None = None


def stop_plan(
    remaining_micro: int, rate_per_hour: Decimal, deadlines: Deadlines
) -> StopPlan | None:
    """The steps' plan once they are due (the money left lasts their deadlines at the
    rate); ``None`` while they are not."""
    grace_s = deadlines.interrupt_s + deadlines.shutdown_s
    if not due(remaining_micro, rate_per_hour, grace_s):
        return None
    length = countdown(remaining_micro, rate_per_hour, grace_s, tick_s=WATCH_INTERVAL_S)
    share = 1.0 if grace_s <= 0 else length.seconds / grace_s
    return StopPlan(
        remaining_micro,
        rate_per_hour,
        replace(
            deadlines,
            interrupt_s=deadlines.interrupt_s * share,
            shutdown_s=deadlines.shutdown_s * share,
        ),
        grace_s,
        length.seconds,
        length.shortened,
    )


class BudgetWatch:
    """Stops the kernel so that the run's cost, as the runner meters it, ends at the budget."""

    def __init__(
        self,
        collector: CostCollector,
        meter: RunMeter,
        budget_micro: int,
        save: Callable[[str], None],
        deadlines: Deadlines | None = None,
        on_plan: Callable[[StopPlan], None] | None = None,
    ) -> None:
        self.collector = collector
        self.meter = meter
        self.budget = budget_micro
        self.save = save
        self.deadlines = deadlines or Deadlines()
        #: told the plan as the steps begin (the runner says it on the terminal)
        self.on_plan = on_plan
        #: the steps' plan, once they began (``None``: the budget held)
        self.plan: StopPlan | None = None
        #: the steps taken, in order (empty: the budget held)
        self.steps: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpucost-budget", daemon=True)

    @property
    def fired(self) -> bool:
        return bool(self.steps)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def spent_micro(self) -> int:
        return run_cost_micro(self.collector, self.meter)

    def _run(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            if self.collector.loop is None:
                continue
            remaining = self.budget - self.spent_micro()
            plan = stop_plan(remaining, self.meter.rate, self.deadlines)
            if plan is None:
                continue
            self.plan = plan
            self.collector.budget_spent = True
            if self.on_plan is not None:
                self.on_plan(plan)
            self._escalate(plan.deadlines)
            return

    def _escalate(self, deadlines: Deadlines) -> None:
        done = self.collector.cells_done
        waits = {
            "interrupt": (deadlines.interrupt_s, lambda _: self.collector.cells_done > done),
            "shutdown": (deadlines.shutdown_s, self._kernel_gone),
            "kill": (deadlines.kill_s, self._kernel_gone),
        }
        # each step's wait ends at a time fixed from the start, so that the time saving
        # the notebook and sending a step take does not push the kill past the budget
        until = time.monotonic()
        for step in STEPS:
            if self._stop.is_set():
                return
            self.steps.append(step)
            self._on_loop(self._save(step), timeout_s=10.0)
            self._on_loop(self._act(step), timeout_s=5.0)
            deadline_s, ended = waits[step]
            until = time.monotonic() + deadline_s if step == "kill" else until + deadline_s
            if self._wait(until, ended):
                break
        if step != "interrupt":
            # the kernel is gone: nothing runs on after this (an interrupted cell's end is
            # the meter's lap)
            self.meter.stop()

    def _wait(self, until: float, ended: Callable[[float], bool]) -> bool:
        """Until ``ended`` (True) or the monotonic time ``until`` (False); ``ended`` is
        given the time left, so that a look at the kernel never runs past ``until``."""
        while (left := until - time.monotonic()) > 0:
            if self._stop.is_set() or ended(left):
                return True
            time.sleep(min(WATCH_INTERVAL_S, max(0.0, until - time.monotonic())))
        return False

    def _kernel_gone(self, left_s: float = 2.0) -> bool:
        alive = self._on_loop(self._is_alive(), timeout_s=max(0.05, min(2.0, left_s)))
        return alive is False

    async def _is_alive(self) -> bool:
        km = self.collector.kernel_manager()
        if km is None:
            return False
        from nbclient.util import ensure_async

        return bool(await ensure_async(km.is_alive()))

    async def _save(self, step: str) -> None:
        self.save(step)

    async def _act(self, step: str) -> None:
        km = self.collector.kernel_manager()
        if km is None:
            return
        from nbclient.util import ensure_async

        if step == "interrupt":
            await ensure_async(km.interrupt_kernel())
        elif step == "shutdown":
            await ensure_async(km.request_shutdown())
        elif km.provisioner is not None:
            await ensure_async(km.provisioner.kill())

    def _on_loop(self, work: Coroutine[Any, Any, object], *, timeout_s: float) -> object:
        """Run ``work`` on the client's loop; its result, or ``None`` if it failed."""
        loop = self.collector.loop
        if loop is None or loop.is_closed():
            work.close()
            return None
        future = asyncio.run_coroutine_threadsafe(work, loop)
        try:
            return future.result(timeout=timeout_s)
        except (FutureTimeout, Exception):
            future.cancel()
            return None
