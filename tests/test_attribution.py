"""Attribution of GPU cost to kernels: the identity, the splits, containers, right-sizing."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.billing import US_PER_S, BillingRule
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.core.meter import Meter
from jupyter_gpucost.core.rightsizing import MODEL_MEMORY_BYTES, advise, why_not
from jupyter_gpucost.server.gpu_use.attribution import (
    NOTE_CONTAINER,
    SHARE_METHODS,
    Attributor,
    split,
)
from jupyter_gpucost.server.gpu_use.kernel_procs import KernelInfo
from jupyter_gpucost.telemetry.base import GpuReading, ProcessReading

CATALOG = load_catalog()
T0 = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
GIB = 2**30
#: pids that exist: this test process and its parent (neither is a kernel here)
ME, PARENT = os.getpid(), os.getppid()


def meter() -> Meter:
    return Meter(
        policy=PricePolicy(catalog=CATALOG, region="us-east-1"),
        rule=BillingRule(1, 60),
        sample_interval_s=1.0,
        start_us=0,
        started=T0,
        base_per_hour=Decimal("0.5"),
    )


def gpu(index: int, util: float | None, processes: list[tuple[int, int | None]]) -> GpuReading:
    return GpuReading(
        index=index,
        uuid=f"GPU-{index}",
        name="NVIDIA A100-SXM4-80GB" if index == 0 else "NVIDIA H100 80GB HBM3",
        memory_total_bytes=85_899_345_920,
        memory_used_bytes=sum(m or 0 for _, m in processes),
        utilization_pct=util,
        processes=tuple(ProcessReading(pid, mem) for pid, mem in processes),
    )


def kernel(kernel_id: str, pid: int | None) -> KernelInfo:
    return KernelInfo(kernel_id, "python3", "busy", f"{kernel_id}.ipynb", pid, T0)


KERNELS = {"a": kernel("a", 101), "b": kernel("b", 202), "remote": kernel("remote", None)}
TREES = {"a": frozenset({101, ME}), "b": frozenset({202, 203})}

pid = st.sampled_from([ME, 202, 203, PARENT])
processes = st.lists(st.tuples(pid, st.one_of(st.none(), st.integers(0, 40 * GIB))), max_size=4)
reading_plan = st.one_of(
    st.none(),
    st.tuples(
        st.one_of(st.none(), st.floats(0, 100)),
        processes,
        st.one_of(st.none(), st.floats(0, 100)),
        processes,
    ),
)
plan = st.lists(st.tuples(st.integers(0, 3 * US_PER_S), reading_plan), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(plan)
def test_kernels_unattributed_and_idle_add_up_to_the_gpu_cost_exactly(steps: list) -> None:
    m, attributor, now = meter(), Attributor(), 0
    for dt, planned in steps:
        now += dt
        readings = None
        if planned is not None:
            u0, p0, u1, p1 = planned
            readings = [gpu(0, u0, p0), gpu(1, u1, p1)]
        snap = m.update(readings, now, T0 + timedelta(microseconds=now))
        result = attributor.update(snap, KERNELS, TREES)
        kernels = sum(k.cost_micro for k in result.kernels)
        assert kernels + result.unattributed_micro + result.idle_micro == (snap.gpu_cost_micro)
        assert result.idle_micro == snap.idle_micro
        assert all(k.cost_micro >= 0 for k in result.kernels)
        # a remote kernel has no process: it is never given GPU cost
        assert next(k for k in result.kernels if k.info.id == "remote").cost_micro == 0


def test_used_time_is_split_by_memory_share_and_process_tree() -> None:
    m, attributor = meter(), Attributor()
    # kernel a holds 30 GiB through a worker (this process, in its tree); kernel b 10 GiB
    readings = [gpu(0, 100.0, [(ME, 30 * GIB), (202, 10 * GIB)])]
    m.update(readings, 0, T0)
    snap = m.update(readings, US_PER_S, T0 + timedelta(seconds=1))
    result = attributor.update(snap, KERNELS, TREES)
    costs = {k.info.id: k.cost_micro for k in result.kernels}
    used = snap.gpus[0].used_micro
    assert costs["a"] + costs["b"] == used
    assert abs(costs["a"] - 3 * costs["b"]) <= 3
    shares = {k.info.id: dict(k.share) for k in result.kernels}
    assert shares["a"] == {0: 0.75}
    assert shares["b"] == {0: 0.25}
    # without memory figures: an even split
    even = Attributor()
    readings = [gpu(0, 100.0, [(ME, None), (202, None)])]
    m2 = meter()
    m2.update(readings, 0, T0)
    snap = m2.update(readings, 2 * US_PER_S, T0 + timedelta(seconds=2))
    costs = {k.info.id: k.cost_micro for k in even.update(snap, KERNELS, TREES).kernels}
    assert abs(costs["a"] - costs["b"]) <= 1


def test_host_pids_in_a_container_are_not_attributed() -> None:
    m, attributor = meter(), Attributor()
    # pids of another namespace: none of them exists here
    readings = [gpu(0, 100.0, [(4_000_001, 30 * GIB), (4_000_002, 10 * GIB)])]
    m.update(readings, 0, T0)
    snap = m.update(readings, US_PER_S, T0 + timedelta(seconds=1))
    result = attributor.update(snap, KERNELS, TREES)
    assert result.pids_visible is False
    assert result.note == NOTE_CONTAINER
    assert all(k.cost_micro == 0 for k in result.kernels)
    assert result.unattributed_micro == snap.gpu_cost_micro - snap.idle_micro


def test_an_ended_kernel_keeps_what_it_cost() -> None:
    m, attributor = meter(), Attributor()
    readings = [gpu(0, 100.0, [(ME, 30 * GIB)])]
    m.update(readings, 0, T0)
    snap = m.update(readings, US_PER_S, T0 + timedelta(seconds=1))
    before = {k.info.id: k.cost_micro for k in attributor.update(snap, KERNELS, TREES).kernels}
    snap = m.update([gpu(0, 0.0, [])], 2 * US_PER_S, T0 + timedelta(seconds=2))
    after = attributor.update(snap, {"b": KERNELS["b"]}, {"b": TREES["b"]})
    ended = next(k for k in after.kernels if k.info.id == "a")
    assert ended.ended is True
    assert ended.cost_micro >= before["a"] > 0


@given(st.integers(0, 10**9), st.lists(st.integers(0, 10**6), min_size=1, max_size=8))
def test_split_adds_up(total: int, weights: list[int]) -> None:
    parts = split(total, weights)
    assert sum(parts) == total
    assert all(p >= 0 for p in parts)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 160 * 10**9), st.integers(1, 4))
def test_right_sizing_never_recommends_a_gpu_smaller_than_the_peak(peak: int, count: int) -> None:
    m = meter()
    readings = [replace(gpu(i, 10.0, []), name="NVIDIA H100 80GB HBM3") for i in range(count)]
    m.update(readings, 0, T0)
    snap = m.update(readings, 3600 * US_PER_S, T0 + timedelta(hours=1))
    advice = advise(
        snap, CATALOG, provider="aws", market="on-demand", region="us-east-1", peak_bytes=peak
    )
    if advice is None:
        return
    assert MODEL_MEMORY_BYTES[advice.model] >= peak
    assert advice.cost_micro < advice.instead_of_micro
    assert advice.gpus == count


def test_right_sizing_names_the_cheapest_fit() -> None:
    m = meter()
    readings = [replace(gpu(0, 10.0, []), name="NVIDIA H100 80GB HBM3")]
    m.update(readings, 0, T0)
    snap = m.update(readings, 3600 * US_PER_S, T0 + timedelta(hours=1))
    # 12 GiB peak: a T4 (16 GB) at 0.526 $/h instead of an H100 at 6.88 $/h
    advice = advise(
        snap, CATALOG, provider="aws", market="on-demand", region="us-east-1", peak_bytes=12 * GIB
    )
    assert advice is not None
    assert (advice.model, advice.cost_micro, advice.instead_of_micro) == (
        "T4",
        526_000,
        6_880_000,
    )
    # 70 GiB (75 GB) fits only the 80 GB boards; the A100-80GB is the cheapest of them
    big = advise(
        snap, CATALOG, provider="aws", market="on-demand", region="us-east-1", peak_bytes=70 * GIB
    )
    assert big is not None
    assert big.model == "A100-80GB"


def test_a_busy_session_gets_no_advice_and_is_told_why() -> None:
    m = meter()
    readings = [replace(gpu(0, 99.0, []), name="NVIDIA H100 80GB HBM3")]
    m.update(readings, 0, T0)
    snap = m.update(readings, 3600 * US_PER_S, T0 + timedelta(hours=1))
    assert (
        advise(
            snap, CATALOG, provider="aws", market="on-demand", region="us-east-1", peak_bytes=GIB
        )
        is None
    )
    note = why_not(snap)
    assert note is not None
    assert "busy 99% of the time" in note


def test_per_process_utilisation_beats_memory_share() -> None:
    m, attributor = meter(), Attributor()
    # kernel a holds most memory but kernel b does 90 % of the computing
    readings = [
        GpuReading(
            index=0,
            uuid="GPU-0",
            name="NVIDIA A100-SXM4-80GB",
            memory_total_bytes=85_899_345_920,
            utilization_pct=100.0,
            processes=(ProcessReading(ME, 30 * GIB, 9.0), ProcessReading(202, 2 * GIB, 81.0)),
        )
    ]
    m.update(readings, 0, T0)
    snap = m.update(readings, US_PER_S, T0 + timedelta(seconds=1))
    result = attributor.update(snap, KERNELS, TREES)
    shares = {k.info.id: dict(k.share) for k in result.kernels}
    assert shares["a"] == {0: 0.1}
    assert shares["b"] == {0: 0.9}
    costs = {k.info.id: k.cost_micro for k in result.kernels}
    assert abs(costs["b"] - 9 * costs["a"]) <= 9


def sampled(index: int, processes: list[tuple[int, int, float | None, int]]) -> GpuReading:
    """A GPU whose processes have (pid, memory, mean SM % of their samples, samples)."""
    return GpuReading(
        index=index,
        uuid=f"GPU-{index}",
        name="NVIDIA H100 80GB HBM3",
        memory_total_bytes=85_520_809_984,
        utilization_pct=100.0,
        processes=tuple(ProcessReading(pid, mem, sm, n) for pid, mem, sm, n in processes),
    )


def test_concurrent_kernels_are_split_by_their_own_measured_gpu_time() -> None:
    # recorded: A at 80 % duty and B at 20 %, polled at 4 Hz: B's samples add up to 9 %
    # of the SM time against a true 21 %; the kernels' own busy time says 0.8 / 0.2
    m, attributor = meter(), Attributor()
    readings = [sampled(0, [(ME, 4 * GIB, 81.0, 30), (202, 8 * GIB, 62.0, 4)])]
    m.update(readings, 0, T0)
    snap = m.update(readings, US_PER_S, T0 + timedelta(seconds=1))
    by_samples = {k.info.id: k for k in attributor.update(snap, KERNELS, TREES).kernels}
    assert by_samples["a"].share_by == {0: "sm_samples"}
    assert by_samples["b"].share[0] == pytest.approx(62 * 4 / (81 * 30 + 62 * 4))
    ended = (T0 + timedelta(seconds=1)).timestamp()
    attributor.note_gpu_time("a", {0: 8.0}, 10.0, ended)
    attributor.note_gpu_time("b", {0: 2.0}, 10.0, ended)
    snap = m.update(readings, 2 * US_PER_S, T0 + timedelta(seconds=2))
    rows = {k.info.id: k for k in attributor.update(snap, KERNELS, TREES).kernels}
    assert rows["a"].share_by == {0: "kernel_gpu_time"}
    assert rows["b"].share == {0: pytest.approx(0.2)}
    assert rows["a"].share == {0: pytest.approx(0.8)}


def test_absent_from_the_samples_means_nothing_even_with_most_memory() -> None:
    m, attributor = meter(), Attributor()
    # b holds 60 GiB and has no sample; a computes with 2 GiB
    readings = [sampled(0, [(ME, 2 * GIB, 97.0, 4), (202, 60 * GIB, None, 0)])]
    m.update(readings, 0, T0)
    snap = m.update(readings, 3 * US_PER_S, T0 + timedelta(seconds=3))
    result = attributor.update(snap, KERNELS, TREES)
    rows = {k.info.id: k for k in result.kernels}
    assert rows["b"].cost_micro == 0
    assert rows["a"].cost_micro == snap.gpus[0].used_micro
    assert rows["a"].share_by == {0: "sm_samples"}
    # a measured GPU time too old to speak for now is not used
    attributor.note_gpu_time("b", {0: 5.0}, 10.0, (T0 - timedelta(hours=1)).timestamp())
    no_samples = [sampled(0, [(ME, 2 * GIB, None, 0), (202, 60 * GIB, None, 0)])]
    snap = m.update(no_samples, 4 * US_PER_S, T0 + timedelta(seconds=4))
    rows = {k.info.id: k for k in attributor.update(snap, KERNELS, TREES).kernels}
    assert rows["b"].share_by == {0: "memory"}


sampled_process = st.tuples(
    pid,
    st.one_of(st.none(), st.integers(0, 80 * GIB)),
    st.one_of(st.none(), st.sampled_from([0.0, 100.0]), st.floats(0, 100)),
    st.integers(0, 12),
)
measured_time = st.one_of(
    st.none(),
    st.tuples(
        st.sampled_from(["a", "b", "remote", "gone"]),
        st.sampled_from([0, 1]),
        st.floats(0, 1e4),
        st.one_of(st.just(0.0), st.floats(1e-6, 1e4)),
    ),
)
sampled_plan = st.lists(
    st.tuples(
        st.integers(0, 3 * US_PER_S),
        st.one_of(st.none(), st.floats(0, 100)),
        st.lists(sampled_process, max_size=4),
        st.lists(sampled_process, max_size=4),
        measured_time,
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(sampled_plan)
def test_every_way_of_splitting_keeps_the_sum_exact(steps: list) -> None:
    # samples (none, 0 %, 100 %, any), memory (none, 0, any), measured GPU times (none, 0,
    # more than the wall time, from kernels that do not exist): the identity always holds
    m, attributor, now = meter(), Attributor(), 0
    for dt, util, p0, p1, measured in steps:
        now += dt
        if measured is not None:
            kernel_id, index, busy_s, wall_s = measured
            attributor.note_gpu_time(kernel_id, {index: busy_s}, wall_s, T0.timestamp())
        readings = [sampled(0, p0), sampled(1, p1)]
        readings = [replace(r, utilization_pct=util) for r in readings]
        snap = m.update(readings, now, T0 + timedelta(microseconds=now))
        result = attributor.update(snap, KERNELS, TREES)
        kernels = sum(k.cost_micro for k in result.kernels)
        assert kernels + result.unattributed_micro + result.idle_micro == (snap.gpu_cost_micro)
        assert all(k.cost_micro >= 0 for k in result.kernels)
        for k in result.kernels:
            assert set(k.share_by.values()) <= set(SHARE_METHODS)
            assert all(0.0 <= v <= 1.0 + 1e-9 for v in k.share.values())
