"""The meter's cost semantics, as properties (hypothesis) and as worked examples."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.billing import US_PER_S, BillingRule, cost_micro
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.core.meter import Meter, apportion
from jupyter_gpucost.core.money import round_micro
from jupyter_gpucost.telemetry.base import GpuReading

CATALOG = load_catalog()
A100 = Decimal("3.431")  # aws on-demand A100-80GB
T0 = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def reading(
    index: int, util: float | None, *, name: str = "NVIDIA A100-SXM4-80GB", lost: bool = False
) -> GpuReading:
    return GpuReading(
        index=index,
        uuid=f"GPU-{index}",
        name=name,
        memory_total_bytes=85_899_345_920,
        utilization_pct=util,
        power_w=None if util is None else 60 + 3.4 * util,
        lost=lost,
    )


def make_meter(
    rule: BillingRule | None = None, interval_s: float = 1.0, base: Decimal = Decimal(0)
) -> Meter:
    return Meter(
        policy=PricePolicy(catalog=CATALOG, region="us-east-1"),
        rule=rule or BillingRule(1, 60),
        sample_interval_s=interval_s,
        start_us=0,
        started=T0,
        base_per_hour=base,
    )


# one step: the time since the previous reading, and each of 2 GPUs' utilisation
# (None: the field is not available; "gone": the device is missing from the reading;
#  a whole step of None: the source failed)
util = st.one_of(st.none(), st.just("gone"), st.floats(0, 100), st.integers(0, 100).map(float))
step = st.tuples(st.integers(0, 5 * US_PER_S), st.one_of(st.none(), st.tuples(util, util)))
steps = st.lists(step, min_size=1, max_size=40)


def feed(meter: Meter, plan: list) -> list:
    now = 0
    snapshots = []
    for dt, utils in plan:
        now += dt
        if utils is None:
            readings = None
        else:
            readings = [reading(i, u) for i, u in enumerate(utils) if u != "gone"]
        snapshots.append(meter.update(readings, now, T0))
    return snapshots


@settings(max_examples=300, deadline=None)
@given(steps)
def test_cost_never_decreases(plan: list) -> None:
    snapshots = feed(make_meter(), plan)
    costs = [s.cost_micro for s in snapshots]
    assert costs == sorted(costs)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_every_gpu_accounts_for_all_elapsed_time_exactly(plan: list) -> None:
    snapshot = feed(make_meter(), plan)[-1]
    for g in snapshot.gpus:
        assert g.used_us + g.idle_us + g.unobserved_us == snapshot.elapsed_us


@settings(max_examples=300, deadline=None)
@given(
    steps,
    st.sampled_from(
        [BillingRule(1, 0), BillingRule(1, 60), BillingRule(60, 0), BillingRule(3600, 60)]
    ),
)
def test_cost_is_price_times_billed_time_within_rounding(plan: list, rule: BillingRule) -> None:
    snapshot = feed(make_meter(rule), plan)[-1]
    exact = sum(
        (cost_micro(A100, rule.billed_us(snapshot.elapsed_us)) for _ in snapshot.gpus),
        Fraction(0),
    )
    # the session's amount is the exact amount rounded once, to the nearest micro-dollar
    assert abs(snapshot.gpu_cost_micro - exact) <= Fraction(1, 2)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_breakdown_adds_up_to_the_total_exactly(plan: list) -> None:
    for snapshot in feed(make_meter(), plan):
        assert (
            snapshot.used_micro
            + snapshot.idle_micro
            + snapshot.unobserved_micro
            + snapshot.adjustment_micro
            == snapshot.gpu_cost_micro
        )
        assert all(
            min(g.used_micro, g.idle_micro, g.unobserved_micro, g.adjustment_micro) >= 0
            for g in snapshot.gpus
        )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2), st.floats(0, 100)), min_size=1, max_size=40))
def test_fully_observed_whole_seconds_split_into_used_plus_idle(plan: list) -> None:
    # readings every 1-2 s (no gap), per-second billing without minimum: no adjustment,
    # nothing unobserved, so used + idle is the whole cost
    meter = make_meter(BillingRule(1, 0))
    now = 0
    for seconds, u in plan:
        now += seconds * US_PER_S
        snapshot = meter.update([reading(0, u), reading(1, 100 - u)], now, T0)
    assert snapshot.unobserved_micro == 0
    assert snapshot.adjustment_micro == 0
    assert snapshot.used_micro + snapshot.idle_micro == snapshot.gpu_cost_micro


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(2, 2 * US_PER_S), st.floats(0, 1), st.floats(0, 100), st.floats(0, 100)
        ),
        min_size=1,
        max_size=30,
    )
)
def test_cost_is_additive_over_intervals(plan: list) -> None:
    # metering [a, c] at once or as [a, b] + [b, c] (same readings) gives the same cost
    whole, split = make_meter(BillingRule(1, 0)), make_meter(BillingRule(1, 0))
    now = 0
    for dt, fraction, u0, u1 in plan:
        readings = [reading(0, u0), reading(1, u1)]
        first = max(1, min(dt - 1, round(dt * fraction)))
        split.update(readings, now + first, T0)
        now += dt
        a = whole.update(readings, now, T0)
        b = split.update(readings, now, T0)
    assert a.cost_micro == b.cost_micro
    for ga, gb in zip(a.gpus, b.gpus, strict=True):
        # each sub-interval's used time is rounded to the microsecond
        assert abs(ga.used_us - gb.used_us) <= len(plan)
        assert abs(ga.used_micro - gb.used_micro) <= 1
        assert abs(ga.idle_micro - gb.idle_micro) <= 1


def test_one_hour_of_two_a100s_half_busy() -> None:
    meter = make_meter(BillingRule(1, 60))
    snapshot = None
    for second in range(1, 3601):
        snapshot = meter.update([reading(0, 50.0), reading(1, 0.0)], second * US_PER_S, T0)
    assert snapshot is not None
    assert snapshot.cost_micro == 6_862_000  # 2 x 3.431 $/h x 1 h
    assert snapshot.rate_per_hour == Decimal("6.862")
    gpu0, gpu1 = snapshot.gpus
    assert gpu0.used_micro == gpu0.idle_micro == 1_715_500
    assert gpu1.used_micro == 0
    assert gpu1.idle_micro == 3_431_000
    assert snapshot.adjustment_micro == 0


def test_minimum_charge_shows_from_the_first_second() -> None:
    meter = make_meter(BillingRule(1, 60))
    snapshot = meter.update([reading(0, 100.0)], 2 * US_PER_S, T0)
    assert snapshot.billed_us == 60 * US_PER_S
    assert snapshot.cost_micro == round_micro(cost_micro(A100, 60 * US_PER_S))  # 57,183
    assert snapshot.adjustment_micro == round_micro(cost_micro(A100, 58 * US_PER_S))


def test_a_sample_gap_is_billed_and_marked_unobserved() -> None:
    meter = make_meter(BillingRule(1, 0), interval_s=1.0)
    meter.update([reading(0, 100.0)], 1 * US_PER_S, T0)
    # the sampler stalled for 30 s: the reading covers at most 2 sample periods
    snapshot = meter.update([reading(0, 100.0)], 31 * US_PER_S, T0)
    (gpu,) = snapshot.gpus
    assert gpu.used_us == 3 * US_PER_S
    assert gpu.unobserved_us == 28 * US_PER_S
    assert snapshot.cost_micro == round_micro(cost_micro(A100, 31 * US_PER_S))


def test_a_lost_or_missing_gpu_is_still_billed() -> None:
    meter = make_meter(BillingRule(1, 0))
    meter.update([reading(0, 100.0), reading(1, 100.0)], 1 * US_PER_S, T0)
    meter.update([reading(0, 100.0), reading(1, None, lost=True)], 2 * US_PER_S, T0)
    snapshot = meter.update([reading(0, 100.0)], 3 * US_PER_S, T0)  # GPU 1 vanished
    gpu0, gpu1 = snapshot.gpus
    assert gpu1.unobserved_us == 2 * US_PER_S
    assert gpu1.cost_micro == gpu0.cost_micro
    assert gpu1.reading is None


def test_a_gpu_without_a_price_is_counted_at_an_upper_bound() -> None:
    meter = make_meter(BillingRule(1, 0))
    snapshot = meter.update(
        [reading(0, 100.0), reading(1, 100.0, name="NVIDIA GeForce RTX 3090")], US_PER_S * 3600, T0
    )
    assert snapshot.unpriced == ()
    bound = snapshot.gpus[1].price
    assert bound is not None
    assert bound.upper_bound
    # the dearest dollar GPU of the catalog, for an hour
    dearest = max(r.per_gpu_hour for r in CATALOG.rows if r.currency == "USD")
    assert bound.per_gpu_hour == dearest
    assert snapshot.cost_micro == 3_431_000 + int(dearest * 1_000_000)
    assert snapshot.rate_per_hour == A100 + dearest


def test_base_price_is_billed_under_the_same_rule() -> None:
    meter = make_meter(BillingRule(1, 60), base=Decimal("0.50"))
    snapshot = meter.update([], 10 * US_PER_S, T0)
    assert snapshot.base_cost_micro == round_micro(cost_micro(Decimal("0.5"), 60 * US_PER_S))
    assert snapshot.cost_micro == snapshot.base_cost_micro == 8333
    assert snapshot.rate_per_hour == Decimal("0.50")


def test_energy_from_the_counter_and_from_power() -> None:
    meter = make_meter(BillingRule(1, 0))
    with_counter = GpuReading(
        index=0, uuid="a", name="NVIDIA H100 80GB HBM3", energy_j=1000.0, power_w=500.0
    )
    with_power = GpuReading(index=1, uuid="b", name="Tesla T4", power_w=70.0)
    meter.update([with_counter, with_power], US_PER_S, T0)
    later = GpuReading(
        index=0, uuid="a", name="NVIDIA H100 80GB HBM3", energy_j=1700.0, power_w=700.0
    )
    snapshot = meter.update([later, with_power], 2 * US_PER_S, T0)
    h100, t4 = snapshot.gpus
    assert h100.energy_j == 700.0  # counter delta, not power x time
    assert t4.energy_j == 140.0  # 70 W for 2 s
    # a counter that goes back (driver reloaded) does not make energy negative
    reset = GpuReading(index=0, uuid="a", name="NVIDIA H100 80GB HBM3", energy_j=5.0)
    snapshot = meter.update([reset, with_power], 3 * US_PER_S, T0)
    assert snapshot.gpus[0].energy_j == 700.0


@given(st.lists(st.fractions(min_value=0, max_value=10**9), min_size=1, max_size=6))
def test_apportion_rounds_each_part_by_less_than_one_and_keeps_the_sum(parts: list) -> None:
    rounded = apportion(parts)
    assert sum(rounded) == round_micro(sum(parts, Fraction(0)))
    assert all(abs(r - p) < 1 for r, p in zip(rounded, parts, strict=True))


@settings(max_examples=300, deadline=None)
@given(steps, st.sampled_from([BillingRule(1, 0), BillingRule(1, 60), BillingRule(60, 60)]))
def test_each_snapshot_carries_what_its_sample_added(plan: list, rule: BillingRule) -> None:
    # the recorder and the metrics take each sample's cost from the snapshot: the deltas
    # must add up to the totals exactly, and the cost's never goes back
    meter = make_meter(rule, base=Decimal("0.5"))
    snapshots = feed(meter, plan)
    assert all(s.cost_delta_micro >= 0 for s in snapshots)
    assert sum(s.cost_delta_micro for s in snapshots) == snapshots[-1].cost_micro
    assert sum(s.idle_delta_micro for s in snapshots) == snapshots[-1].idle_micro
    previous = 0
    for s in snapshots:
        assert s.cost_delta_micro == s.cost_micro - previous
        previous = s.cost_micro
    # reading the meter again does not count the last sample twice
    assert meter.snapshot().cost_delta_micro == snapshots[-1].cost_delta_micro
    assert meter.snapshot().cost_micro == snapshots[-1].cost_micro


def test_the_first_sample_carries_the_minimum_charge() -> None:
    meter = make_meter(BillingRule(1, 60))
    first = meter.update([reading(0, 50.0)], US_PER_S, T0)
    # a minute of an A100 at $3.431/h is billed from the first second
    assert first.cost_delta_micro == first.cost_micro == 57_183
    second = meter.update([reading(0, 50.0)], 2 * US_PER_S, T0)
    assert second.cost_delta_micro == 0
