"""Record live NVML readings to a trace the simulated source can replay.

    python -m jupyter_gpucost.telemetry.record OUT.jsonl.gz --duration-s 600 --interval-s 1

Run it on a machine with NVIDIA GPUs while a workload runs; ``c.GpuCost.simulated_trace``
then replays the file anywhere.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator

from .base import GpuReading, SourceUnavailable, TelemetrySource
from .trace import TraceDevice, write_trace


def _frames(
    source: TelemetrySource, duration_s: float, interval_s: float
) -> Iterator[tuple[float, tuple[GpuReading, ...]]]:
    start = time.monotonic()
    next_at = start
    while True:
        now = time.monotonic()
        if now - start > duration_s:
            return
        yield now - start, source.read()
        next_at += interval_s
        time.sleep(max(next_at - time.monotonic(), 0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_gpucost.telemetry.record", description=__doc__.split("\n")[0]
    )
    parser.add_argument("out", help="the trace file to write (.jsonl or .jsonl.gz)")
    parser.add_argument("--duration-s", type=float, default=600.0, help="how long to record")
    parser.add_argument("--interval-s", type=float, default=1.0, help="seconds between readings")
    parser.add_argument("--name", default="recorded session", help="a name shown in the UI")
    args = parser.parse_args(argv)
    if args.interval_s <= 0 or args.duration_s <= 0:
        parser.error("--duration-s and --interval-s must be positive")

    from .nvml import NvmlSource

    source = NvmlSource()
    try:
        source.open()
    except SourceUnavailable as e:
        print(f"cannot record: {e.reason}", file=sys.stderr)
        return 1
    try:
        first = source.read()
        devices = [TraceDevice(r.index, r.uuid, r.name, r.memory_total_bytes) for r in first]
        count = write_trace(
            args.out,
            name=args.name,
            interval_s=args.interval_s,
            synthetic=False,
            devices=devices,
            frames=_frames(source, args.duration_s, args.interval_s),
        )
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        source.close()
    print(f"wrote {count} frames of {len(devices)} GPUs to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
