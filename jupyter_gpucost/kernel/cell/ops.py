"""``%%gpucost --ops``: the cell's top operators, read straight from the profiler's events.

``torch.profiler``'s ``key_averages()`` builds a Python object per event and a tree of
them, 45-70 ms a cell on an H100 (a third of a 157 ms cell); the raw Kineto events
(``prof.profiler.kineto_results.events()``) give the same table in about 4 ms:

* on the GPU, each kernel's time goes to the operator that launched it: the kernel's
  ``linked_correlation_id()`` is the ``correlation_id()`` of that operator (what
  ``key_averages()`` calls its *self device time*); the kernels' intervals, merged per
  device, are the cell's GPU **busy** time;
* on the CPU, an operator's *self CPU time* is its duration less that of the operators
  nested in it on the same thread (the same tree ``key_averages()`` builds).

Operators are grouped by name, as ``key_averages()`` groups them.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: names the profiler itself leaves out of its tables (torch's ``_filter_name``)
FILTERED = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)
#: a cell with this many GPU kernels (or operators, on the CPU) ...
MANY_EVENTS = 1000
#: ... averaging under this many microseconds is one the profiler slows down 2x or more
TINY_US = 20.0


@dataclass(frozen=True)
class OpRow:
    name: str
    calls: int
    self_time_us: float


@dataclass
class OpsTable:
    """What the profiler saw in one cell."""

    #: "self device time" (GPU kernels) or "self CPU time"
    by: str
    rows: list[OpRow] = field(default_factory=list)
    #: the ranked quantity summed over every operator (the shares' denominator)
    total_us: float = 0.0
    #: device index -> seconds some kernel ran on it (overlapping kernels counted once)
    busy_s: dict[int, float] = field(default_factory=dict)
    kernels: int = 0
    notes: list[str] = field(default_factory=list)


def _name(event: Any) -> str:
    name = str(event.name())
    return "ProfilerStep*" if name.startswith("ProfilerStep#") else name


def ops_table(events: Sequence[Any], *, cuda: bool, top: int) -> OpsTable:
    """The top ``top`` operators of a cell from the raw Kineto ``events``.

    Each event is a binding into the profiler's C++ results, and every method called on it
    costs about a microsecond: a cell of thousands of tiny kernels has thousands of them,
    so each event's name and device are read once, and a kernel's fields in one pass."""
    cpu: list[tuple[Any, str]] = []
    kernels: list[Any] = []
    #: the profiler's device kinds (its own enum), filled from the first event
    kinds: dict[Any, str] = {}
    for e in events:
        name = _name(e)
        if name in FILTERED or e.is_hidden_event():
            continue
        device = e.device_type()
        kind = kinds.get(device)
        if kind is None:
            kind = kinds[device] = str(device).rsplit(".", 1)[-1]
        if kind == "CPU":
            cpu.append((e, name))
        elif kind == "CUDA":
            kernels.append(e)
    counts: dict[str, int] = defaultdict(int)
    for _, name in cpu:
        counts[name] += 1
    table = OpsTable(by="self CPU time")
    table.kernels = len(kernels)
    if cuda and kernels:
        table.by = "self device time"
        # each kernel's time goes to the operator that launched it
        launched = [int(k.linked_correlation_id()) for k in kernels]
        wanted = set(launched)
        by_id: dict[int, tuple[int, str]] = {}
        for e, name in cpu:
            cid = int(e.correlation_id())
            if cid in wanted and int(e.linked_correlation_id()) == 0:
                by_id[cid] = (cid, name)
        device_us: dict[str, float] = defaultdict(float)
        calls: dict[str, set[int]] = defaultdict(set)
        spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for k, link in zip(kernels, launched, strict=True):
            start, duration = int(k.start_ns()), int(k.duration_ns())
            spans[int(k.device_index())].append((start, start + duration))
            op = by_id.get(link)
            name = op[1] if op is not None else _name(k)
            device_us[name] += duration / 1e3
            calls[name].add(op[0] if op is not None else id(k))
        ranked = sorted(device_us.items(), key=lambda kv: kv[1], reverse=True)
        table.rows = [
            OpRow(name, counts.get(name, len(calls[name])), us) for name, us in ranked[:top]
        ]
        table.total_us = sum(device_us.values())
        table.busy_s = {device: union_s(s) for device, s in spans.items()}
        _tiny(table, len(kernels), table.total_us, "GPU kernels")
        return table
    self_us, outermost = self_cpu_us(e for e, _ in cpu)
    ranked = sorted(self_us.items(), key=lambda kv: kv[1], reverse=True)
    table.rows = [OpRow(name, counts[name], us) for name, us in ranked[:top] if us > 0]
    table.total_us = sum(self_us.values())
    _tiny(table, outermost, table.total_us, "operators")
    return table


def self_cpu_us(cpu: Iterable[Any]) -> tuple[dict[str, float], int]:
    """Each operator name's self CPU time: its events' durations less their children's;
    and how many operators were called from the cell itself (nested in no other).

    Children are the events nested in an event on the same thread (not async ones), as in
    torch's ``EventList._populate_cpu_children``."""
    out: dict[str, float] = defaultdict(float)
    outermost = 0
    sync = [e for e in cpu if not e.is_async() and e.start_thread_id() == e.end_thread_id()]
    sync.sort(key=lambda e: e.start_thread_id())
    for _, group in itertools.groupby(sync, key=lambda e: e.start_thread_id()):
        spans = sorted(
            ((e.start_ns(), e.start_ns() + e.duration_ns(), _name(e)) for e in group),
            key=lambda s: (s[0], -s[1]),
        )
        stack: list[tuple[int, int, str]] = []
        for start, end, name in spans:
            while stack and (start >= stack[-1][1] or end > stack[-1][1]):
                stack.pop()
            duration_us = (end - start) / 1e3
            out[name] += duration_us
            if stack:
                out[stack[-1][2]] -= duration_us
            else:
                outermost += 1
            stack.append((start, end, name))
    return dict(out), outermost


def union_s(spans: list[tuple[int, int]]) -> float:
    """Seconds covered by the union of ``spans`` (start, end in nanoseconds)."""
    spans.sort()
    total = 0
    current_start, current_end = spans[0]
    for start, end in spans[1:]:
        if start > current_end:
            total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    total += current_end - current_start
    return total / 1e9


def _tiny(table: OpsTable, count: int, total_us: float, what: str) -> None:
    if count >= MANY_EVENTS and total_us / count < TINY_US:
        table.notes.append(
            f"this cell ran {count:,} {what} averaging {total_us / count:.1f} µs: with this "
            "many tiny ones the profiler itself makes the cell 2x slower or more; "
            "%%gpucost without --ops does not"
        )
