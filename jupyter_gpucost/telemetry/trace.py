"""The trace format: GPU readings over time, one JSON object per line (gzip optional).

The first line is a header::

    {"format": "jupyter-gpucost-trace", "version": 1, "name": "...",
     "interval_s": 1.0, "synthetic": false,
     "devices": [{"index": 0, "uuid": "GPU-...", "name": "NVIDIA A100-SXM4-80GB",
                  "memory_total_bytes": 85899345920}]}

then one frame per sample::

    {"t": 12.0, "gpus": [{"utilization_pct": 97.0, "memory_used_bytes": 61203267584,
                          "power_w": 391.2, "energy_j": 5001234.5,
                          "processes": [[4242, 61203267584]]}]}

``python -m jupyter_gpucost.telemetry.record`` writes this format from the live NVML
source; the simulated source replays it.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .base import GpuReading, ProcessReading

FORMAT = "jupyter-gpucost-trace"
VERSION = 1


class TraceError(ValueError):
    """The trace cannot be read; the message names the line."""


@dataclass(frozen=True)
class TraceDevice:
    index: int
    uuid: str
    name: str
    memory_total_bytes: int | None


@dataclass(frozen=True)
class Trace:
    name: str
    interval_s: float
    synthetic: bool
    devices: tuple[TraceDevice, ...]
    #: one tuple of readings per frame, in device order
    frames: tuple[tuple[GpuReading, ...], ...]


def _open_text(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return path.open(mode, encoding="utf-8")


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def read_trace(path: str | Path) -> Trace:
    path = Path(path)
    try:
        with _open_text(path, "r") as f:
            lines = iter(f)
            header = _parse(next(lines, ""), 1)
            if header.get("format") != FORMAT or header.get("version") != VERSION:
                raise TraceError(f"{path}: not a {FORMAT} v{VERSION} file")
            devices = tuple(
                TraceDevice(
                    index=int(d["index"]),
                    uuid=str(d["uuid"]),
                    name=str(d["name"]),
                    memory_total_bytes=_opt_int(d.get("memory_total_bytes")),
                )
                for d in header["devices"]
            )
            frames = tuple(
                _frame(_parse(line, number), devices, path, number)
                for number, line in enumerate(lines, start=2)
                if line.strip()
            )
    except OSError as e:
        raise TraceError(f"cannot read trace {path}: {e.strerror or e}") from None
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, TraceError):
            raise
        raise TraceError(f"{path}: malformed trace ({e})") from None
    if not frames:
        raise TraceError(f"{path}: the trace has no frames")
    return Trace(
        name=str(header.get("name", path.name)),
        interval_s=float(header["interval_s"]),
        synthetic=bool(header.get("synthetic", False)),
        devices=devices,
        frames=frames,
    )


def _parse(line: str, number: int) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as e:
        raise TraceError(f"line {number}: not JSON ({e.msg})") from None
    if not isinstance(value, dict):
        raise TraceError(f"line {number}: expected an object")
    return value


def _frame(
    raw: dict[str, Any], devices: tuple[TraceDevice, ...], path: Path, number: int
) -> tuple[GpuReading, ...]:
    gpus = raw["gpus"]
    if len(gpus) != len(devices):
        raise TraceError(f"{path}: line {number} has {len(gpus)} GPUs, the header {len(devices)}")
    return tuple(
        GpuReading(
            index=device.index,
            uuid=device.uuid,
            name=device.name,
            nvml_index=device.index,
            memory_total_bytes=device.memory_total_bytes,
            memory_used_bytes=_opt_int(g.get("memory_used_bytes")),
            utilization_pct=_opt_float(g.get("utilization_pct")),
            power_w=_opt_float(g.get("power_w")),
            energy_j=_opt_float(g.get("energy_j")),
            processes=None
            if g.get("processes") is None
            else tuple(ProcessReading(int(p[0]), _opt_int(p[1])) for p in g["processes"]),
            lost=bool(g.get("lost", False)),
        )
        for device, g in zip(devices, gpus, strict=True)
    )


def frame_to_json(t: float, readings: Iterable[GpuReading]) -> dict[str, object]:
    return {
        "t": round(t, 3),
        "gpus": [
            {
                "utilization_pct": r.utilization_pct,
                "memory_used_bytes": r.memory_used_bytes,
                "power_w": None if r.power_w is None else round(r.power_w, 3),
                "energy_j": None if r.energy_j is None else round(r.energy_j, 3),
                "processes": None
                if r.processes is None
                else [[p.pid, p.used_memory_bytes] for p in r.processes],
                **({"lost": True} if r.lost else {}),
            }
            for r in readings
        ],
    }


def write_trace(
    path: str | Path,
    *,
    name: str,
    interval_s: float,
    synthetic: bool,
    devices: Iterable[TraceDevice],
    frames: Iterable[tuple[float, Iterable[GpuReading]]],
) -> int:
    """Write a trace; returns the number of frames written."""
    path = Path(path)
    header = {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "interval_s": interval_s,
        "synthetic": synthetic,
        "devices": [d.__dict__ for d in devices],
    }
    count = 0
    with _open_text(path, "w") as f:
        f.write(json.dumps(header) + "\n")
        for t, readings in frames:
            f.write(json.dumps(frame_to_json(t, readings), separators=(",", ":")) + "\n")
            count += 1
    return count
