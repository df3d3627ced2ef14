"""The simulated source and the trace format it replays."""

from __future__ import annotations

import gzip
import json
import logging
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from jupyter_gpucost.core.billing import US_PER_S, BillingRule
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.core.meter import Meter
from jupyter_gpucost.server.sampler import Sampler
from jupyter_gpucost.telemetry import demo_trace
from jupyter_gpucost.telemetry.base import GpuReading, SourceUnavailable
from jupyter_gpucost.telemetry.simulated import (
    SimulatedSource,
    demo_trace_path,
    resolve_trace,
    shipped_traces,
)
from jupyter_gpucost.telemetry.trace import TraceError, read_trace


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_shipped_trace_is_what_the_generator_writes(tmp_path: Path) -> None:
    out = tmp_path / "trace.jsonl.gz"
    assert demo_trace.main([str(out)]) == 0
    assert read_trace(out) == read_trace(demo_trace_path())


def test_demo_trace_looks_like_a_real_session() -> None:
    trace = read_trace(demo_trace_path())
    assert trace.synthetic is True
    assert "synthetic" in trace.name
    assert [d.name for d in trace.devices] == ["NVIDIA A100-SXM4-80GB"] * 2
    assert len(trace.frames) == 1800
    utils = [r.utilization_pct for frame in trace.frames for r in frame]
    mean = sum(u for u in utils if u is not None) / len(utils)
    assert 30 <= mean <= 50  # the utilisation notebooks really see
    # training is busy, the lunch break is idle
    assert all(r.utilization_pct >= 90 for r in trace.frames[300])
    assert all(r.utilization_pct == 0 for r in trace.frames[1500])
    for a, b in zip(trace.frames, trace.frames[1:], strict=False):
        for ra, rb in zip(a, b, strict=True):
            assert rb.energy_j > ra.energy_j


def test_replays_the_frame_for_the_time_since_open_and_loops() -> None:
    clock = FakeClock()
    source = SimulatedSource(clock=clock)
    source.open()
    trace = read_trace(demo_trace_path())
    assert source.read() == trace.frames[0]
    clock.now += 300.4
    assert source.read() == trace.frames[300]
    # one loop later: same utilisation, but the energy counter kept rising
    clock.now += 1800
    looped = source.read()
    assert [r.utilization_pct for r in looped] == [r.utilization_pct for r in trace.frames[300]]
    assert all(a.energy_j > b.energy_j for a, b in zip(looped, trace.frames[-1], strict=True))
    status = source.status()
    assert status.simulated
    assert status.available
    assert status.source == "simulated"
    assert status.detail["synthetic"] == "yes"


def test_a_missing_or_broken_trace_makes_the_source_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="cannot read trace"):
        SimulatedSource(tmp_path / "nope.jsonl").open()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"format": "jupyter-gpucost-trace", "version": 1, "interval_s": 1, "devices": [{"index": 0, "uuid": "u", "name": "n"}]}\n{"t": 0, "gpus": [{}]}\nnot json\n'
    )
    with pytest.raises(SourceUnavailable, match="line 3: not JSON"):
        SimulatedSource(bad).open()
    other = tmp_path / "other.jsonl.gz"
    with gzip.open(other, "wt") as f:
        f.write(json.dumps({"format": "something-else"}) + "\n")
    with pytest.raises(TraceError, match="not a jupyter-gpucost-trace"):
        read_trace(other)


def make_meter() -> Meter:
    return Meter(
        policy=PricePolicy(catalog=load_catalog(), region="us-east-1"),
        rule=BillingRule(1, 0),
        sample_interval_s=1.0,
        start_us=0,
        started=datetime(2026, 11, 22, tzinfo=UTC),
    )


class ExplodingSource:
    name = "exploding"
    simulated = False

    def __init__(self) -> None:
        self.calls = 0

    def open(self) -> None:
        pass

    def read(self) -> tuple[GpuReading, ...]:
        self.calls += 1
        if self.calls == 1:
            return (
                GpuReading(index=0, uuid="u", name="NVIDIA H100 80GB HBM3", utilization_pct=100.0),
            )
        raise RuntimeError("driver went away")

    def status(self):  # type: ignore[no-untyped-def]
        return SimulatedSource().status()

    def close(self) -> None:
        pass


def test_a_read_that_raises_is_billed_as_unobserved_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    times = iter(range(0, 100 * US_PER_S, US_PER_S))
    sampler = Sampler(ExplodingSource(), make_meter(), interval_s=1.0, clock_us=lambda: next(times))
    with caplog.at_level(logging.WARNING):
        for _ in range(10):
            published = sampler.sample_once()
    (gpu,) = published.snapshot.gpus
    assert gpu.unobserved_us == 9 * US_PER_S
    assert gpu.cost_micro == 17_200  # 9 s of an H100 at 6.88 $/h, billed regardless
    assert sampler.stats().failed_reads == 9
    assert sum("telemetry read failed" in r.message for r in caplog.records) == 1


def test_the_sampler_thread_publishes_and_stops() -> None:
    source = SimulatedSource()
    source.open()
    sampler = Sampler(source, make_meter(), interval_s=0.05)
    sampler.start()
    try:
        import time

        deadline = time.monotonic() + 5
        while sampler.latest.snapshot.samples < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sampler.latest.snapshot.samples >= 5
        assert sampler.latest.snapshot.rate_per_hour == Decimal("6.862")
    finally:
        sampler.stop()
    stats = sampler.stats()
    assert stats.samples >= 5
    assert stats.cpu_s_total > 0


def test_shipped_traces_are_selectable_by_name() -> None:
    # the recorded H100 session replays by name, labelled as recorded (not synthetic)
    assert {"a100x2-training", "h100-live"} <= set(shipped_traces())
    source = SimulatedSource("h100-live")
    source.open()
    status = source.status()
    assert status.detail["trace_file"] == "h100-live.jsonl.gz"
    assert status.detail["synthetic"] == "no"
    (reading,) = source.read()
    assert reading.name == "NVIDIA H100 80GB HBM3"
    assert reading.memory_total_bytes == 85520809984
    assert resolve_trace("") == demo_trace_path()
    assert resolve_trace("some/where.jsonl") == Path("some/where.jsonl")


class PollingSimulated(SimulatedSource):
    """A source that also collects between readings, as NVML's per-process samples do."""

    def __init__(self) -> None:
        super().__init__()
        self.polls: list[str] = []
        self.reads = 0

    def poll(self) -> None:
        import threading

        self.polls.append(threading.current_thread().name)

    def read(self) -> tuple[GpuReading, ...]:
        self.reads += 1
        return super().read()


def test_the_sampler_polls_a_polling_source_between_readings_in_its_thread() -> None:
    import time

    source = PollingSimulated()
    source.open()
    sampler = Sampler(source, make_meter(), interval_s=0.5, poll_interval_s=0.1)
    sampler.start()
    try:
        deadline = time.monotonic() + 10
        while source.reads < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sampler.stop()
    assert source.reads >= 3
    # several polls between two readings, all in the sampler's thread
    assert len(source.polls) >= 1
    assert set(source.polls) == {"gpucost-sampler"}
