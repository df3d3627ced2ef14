"""The meter: turns a stream of GPU readings into what the session has cost.

Every GPU the session has seen is rented from the session's start to now, whether it
computes or not. Each interval between two readings is split, per GPU, into

* **used** time: the interval × the utilisation the reading at its end reports,
* **idle** time: the rest of the observed interval,
* **unobserved** time: what no reading covers (a sample gap longer than two sample
  periods, a failed read, a lost or missing device). It is still billed.

Time is integer microseconds of a monotonic clock, so for every GPU
``used + idle + unobserved == elapsed`` exactly. Money follows from time at the end: the
billed time (elapsed rounded by the billing rule) × the GPU's hourly price, as an exact
fraction, rounded once to micro-dollars; the used/idle/unobserved/adjustment split of that
rounded amount is apportioned by largest remainder, so the parts always add up to the
total and each is within one micro-dollar of its exact value.

A price that changes during the session (a rental's billed rate read again,
:meth:`Meter.reprice`) applies from the time metered so far on: what was metered keeps its
price (carried as exact fractions), what follows is priced at the new one.

The meter is pure: no threads, no clocks of its own. The sampler feeds it (and holds the
lock that keeps an update and a reprice apart).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from fractions import Fraction

from .billing import US_PER_S, BillingRule, cost_micro
from .catalog import Price, PricePolicy
from .gpu_models import model_for
from .money import round_micro
from .readings import GpuReading


def apportion(parts: Sequence[Fraction]) -> list[int]:
    """Round non-negative exact parts to integers that add up to their rounded sum.

    Largest-remainder method: each result is the floor or the ceiling of its part.
    """
    total = round_micro(sum(parts, Fraction(0)))
    floors = [math.floor(p) for p in parts]
    extra = total - sum(floors)
    order = sorted(range(len(parts)), key=lambda i: parts[i] - floors[i], reverse=True)
    for i in order[:extra]:
        floors[i] += 1
    return floors


@dataclass(frozen=True)
class GpuSessionCost:
    """One GPU's share of the session, at one snapshot."""

    index: int
    uuid: str
    name: str
    model: str | None
    price: Price | None
    #: the latest reading, or ``None`` when the device did not answer in the last sample
    reading: GpuReading | None
    used_us: int
    idle_us: int
    unobserved_us: int
    billed_us: int
    cost_micro: int
    used_micro: int
    idle_micro: int
    unobserved_micro: int
    adjustment_micro: int
    #: energy drawn during the session, ``None`` when the device reports neither energy nor power
    energy_j: float | None

    @property
    def priced(self) -> bool:
        return self.price is not None


@dataclass(frozen=True)
class MeterSnapshot:
    started: datetime
    as_of: datetime
    elapsed_us: int
    billed_us: int
    gpus: tuple[GpuSessionCost, ...]
    base_per_hour: Decimal
    base_cost_micro: int
    samples: int
    #: what the latest update added to the cost (``cost_micro``) and to its idle
    #: part (``idle_micro``): the deltas of all updates add up to the totals exactly.
    #: The cost delta is never negative; the idle delta can be -1 when the rounding of
    #: the parts moves a micro-dollar out of the idle part.
    cost_delta_micro: int = 0
    idle_delta_micro: int = 0

    @property
    def gpu_cost_micro(self) -> int:
        return sum(g.cost_micro for g in self.gpus)

    @property
    def cost_micro(self) -> int:
        return self.gpu_cost_micro + self.base_cost_micro

    @property
    def used_micro(self) -> int:
        return sum(g.used_micro for g in self.gpus)

    @property
    def idle_micro(self) -> int:
        return sum(g.idle_micro for g in self.gpus)

    @property
    def unobserved_micro(self) -> int:
        return sum(g.unobserved_micro for g in self.gpus)

    @property
    def adjustment_micro(self) -> int:
        return sum(g.adjustment_micro for g in self.gpus)

    @property
    def rate_per_hour(self) -> Decimal:
        prices = [g.price.per_gpu_hour for g in self.gpus if g.price is not None]
        return sum(prices, Decimal(0)) + self.base_per_hour

    @property
    def energy_j(self) -> float | None:
        values = [g.energy_j for g in self.gpus if g.energy_j is not None]
        return sum(values) if values else None

    @property
    def unpriced(self) -> tuple[GpuSessionCost, ...]:
        return tuple(g for g in self.gpus if g.price is None)


class _Account:
    """Running totals for one GPU."""

    def __init__(self, reading: GpuReading, price: Price | None, model: str | None) -> None:
        self.index = reading.index
        self.uuid = reading.uuid
        self.name = reading.name
        self.model = model
        self.price = price
        self.used_us = 0
        self.idle_us = 0
        self.unobserved_us = 0
        self.energy_j: float | None = None
        self._energy_counter_j: float | None = None
        self.reading: GpuReading | None = reading
        self.memory_total_bytes = reading.memory_total_bytes
        #: used, idle and unobserved cost at earlier prices (exact micro-dollars), and the
        #: times they cover
        self._carried = [Fraction(0)] * 3
        self._carried_us = (0, 0, 0)

    def reprice(self, price: Price | None) -> None:
        """Keep what was metered at the price it had; price what follows at ``price``."""
        times = (self.used_us, self.idle_us, self.unobserved_us)
        if self.price is not None:
            per_hour = self.price.per_gpu_hour
            for i, (now_us, before_us) in enumerate(zip(times, self._carried_us, strict=True)):
                self._carried[i] += cost_micro(per_hour, now_us - before_us)
        self._carried_us = times
        self.price = price

    def account(self, reading: GpuReading | None, observed_us: int, gap_us: int) -> None:
        self.reading = reading
        interval_us = observed_us + gap_us
        if reading is None or reading.lost or reading.utilization_pct is None:
            self.unobserved_us += interval_us
        else:
            share = min(max(reading.utilization_pct, 0.0), 100.0) / 100.0
            used = min(observed_us, round(observed_us * share))
            self.used_us += used
            self.idle_us += observed_us - used
            self.unobserved_us += gap_us
        self._account_energy(reading, observed_us)

    def _account_energy(self, reading: GpuReading | None, observed_us: int) -> None:
        if reading is None or reading.lost:
            return
        if reading.energy_j is not None:
            previous = self._energy_counter_j
            self._energy_counter_j = reading.energy_j
            if self.energy_j is None:
                self.energy_j = 0.0
            # a counter that went back means the driver was reloaded: count from there
            if previous is not None and reading.energy_j >= previous:
                self.energy_j += reading.energy_j - previous
        elif reading.power_w is not None:
            self._energy_counter_j = None
            self.energy_j = (self.energy_j or 0.0) + reading.power_w * observed_us / US_PER_S

    def exact_parts(self, billed_us: int, elapsed_us: int) -> list[Fraction]:
        """Exact micro-dollars: used, idle, unobserved, billing adjustment."""
        if self.price is None:
            return [*self._carried, Fraction(0)]
        per_hour = self.price.per_gpu_hour
        used, idle, unobserved = self._carried_us
        return [
            self._carried[0] + cost_micro(per_hour, self.used_us - used),
            self._carried[1] + cost_micro(per_hour, self.idle_us - idle),
            self._carried[2] + cost_micro(per_hour, self.unobserved_us - unobserved),
            cost_micro(per_hour, billed_us - elapsed_us),
        ]

    def cost(self, billed_us: int, amounts: Sequence[int]) -> GpuSessionCost:
        used, idle, unobserved, adjustment = amounts
        return GpuSessionCost(
            index=self.index,
            uuid=self.uuid,
            name=self.name,
            model=self.model,
            price=self.price,
            reading=self.reading,
            used_us=self.used_us,
            idle_us=self.idle_us,
            unobserved_us=self.unobserved_us,
            billed_us=billed_us,
            cost_micro=used + idle + unobserved + adjustment,
            used_micro=used,
            idle_micro=idle,
            unobserved_micro=unobserved,
            adjustment_micro=adjustment,
            energy_j=self.energy_j,
        )


class Meter:
    """Integrates readings into the session's cost.

    ``update`` is called by one thread (the sampler); ``snapshot`` values are immutable and
    can be handed to any thread.
    """

    def __init__(
        self,
        *,
        policy: PricePolicy,
        rule: BillingRule,
        sample_interval_s: float,
        start_us: int,
        started: datetime,
        base_per_hour: Decimal = Decimal(0),
    ) -> None:
        self._policy = policy
        self._rule = rule
        #: the longest stretch one reading is taken to describe
        self._max_observed_us = max(int(2 * sample_interval_s * US_PER_S), 1)
        self._start_us = start_us
        self._last_us = start_us
        self._started = started
        self._as_of = started
        self._base_per_hour = base_per_hour
        #: the base cost at earlier base prices, and the elapsed time it covers
        self._base_carried = Fraction(0)
        self._base_carried_us = 0
        self._accounts: dict[str, _Account] = {}
        self._samples = 0
        #: the totals before the latest update, and what it added
        self._cost_before_micro = 0
        self._idle_before_micro = 0
        self._cost_delta_micro = 0
        self._idle_delta_micro = 0

    def update(
        self, readings: Sequence[GpuReading] | None, now_us: int, now: datetime
    ) -> MeterSnapshot:
        """Account for the interval since the last update.

        ``readings`` is ``None`` when the source failed to answer: the interval is billed
        and marked unobserved for every GPU.
        """
        interval_us = max(now_us - self._last_us, 0)
        observed_us = min(interval_us, self._max_observed_us)
        gap_us = interval_us - observed_us
        elapsed_before_us = self._last_us - self._start_us
        seen: set[str] = set()
        if readings is not None:
            self._samples += 1
            for reading in readings:
                seen.add(reading.uuid)
                account = self._accounts.get(reading.uuid)
                if account is None:
                    account = self._open_account(reading)
                    # rented since the session started, unseen until now
                    account.unobserved_us += elapsed_before_us
                account.account(reading, observed_us, gap_us)
        for uuid, account in self._accounts.items():
            if uuid not in seen:
                account.account(None, observed_us, gap_us)
        self._last_us = max(now_us, self._last_us)
        self._as_of = now
        snapshot = self.snapshot()
        cost, idle = snapshot.cost_micro, snapshot.idle_micro
        self._cost_delta_micro = cost - self._cost_before_micro
        self._idle_delta_micro = idle - self._idle_before_micro
        self._cost_before_micro, self._idle_before_micro = cost, idle
        return replace(
            snapshot,
            cost_delta_micro=self._cost_delta_micro,
            idle_delta_micro=self._idle_delta_micro,
        )

    def prices(self) -> tuple[dict[str, Price | None], Decimal]:
        """The price in force of each GPU (by UUID) and the base price, from now on."""
        return {u: a.price for u, a in self._accounts.items()}, self._base_per_hour

    def reprice(self, policy: PricePolicy, base_per_hour: Decimal) -> None:
        """Price from now on with ``policy`` and ``base_per_hour``; what was metered
        up to the last update keeps the prices it had (never repriced backwards)."""
        self._policy = policy
        for account in self._accounts.values():
            account.reprice(policy.price_for(account.name, account.memory_total_bytes))
        elapsed_us = self._last_us - self._start_us
        self._base_carried += cost_micro(self._base_per_hour, elapsed_us - self._base_carried_us)
        self._base_carried_us = elapsed_us
        self._base_per_hour = base_per_hour

    def _open_account(self, reading: GpuReading) -> _Account:
        price = self._policy.price_for(reading.name, reading.memory_total_bytes)
        if price is not None:
            model: str | None = price.model
        else:
            model = model_for(reading.name, reading.memory_total_bytes)
        account = _Account(reading, price, model)
        self._accounts[reading.uuid] = account
        return account

    def snapshot(self) -> MeterSnapshot:
        elapsed_us = self._last_us - self._start_us
        billed_us = self._rule.billed_us(elapsed_us)
        accounts = sorted(self._accounts.values(), key=lambda a: a.index)
        # every part of the session, exact; rounded together so that the total is the
        # exact total rounded once and the parts add up to it
        parts = [p for a in accounts for p in a.exact_parts(billed_us, elapsed_us)]
        parts.append(
            self._base_carried + cost_micro(self._base_per_hour, billed_us - self._base_carried_us)
        )
        amounts = apportion(parts)
        gpus = tuple(a.cost(billed_us, amounts[4 * i : 4 * i + 4]) for i, a in enumerate(accounts))
        return MeterSnapshot(
            started=self._started,
            as_of=self._as_of,
            elapsed_us=elapsed_us,
            billed_us=billed_us,
            gpus=gpus,
            base_per_hour=self._base_per_hour,
            base_cost_micro=amounts[-1],
            samples=self._samples,
            cost_delta_micro=self._cost_delta_micro,
            idle_delta_micro=self._idle_delta_micro,
        )
