"""What each cell cost, as kernels report it: checked, kept in memory and in the ledger.

A kernel with ``%gpucost auto on`` (or a ``%%gpucost`` cell) posts one record per cell;
the notebook shows it as a badge next to the cell and the panel lists recent cells. The
record is the kernel's own measurement at the prices the server gave it; the server checks
its shape and bounds, and never lets it change the session's cost (that is metered from
the GPUs).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Protocol

from ...core.i18n import _
from ...core.money import round_micro
from ...core.record_rules import (
    EARLIEST,
    MAX_AHEAD,
    NO_TIME_ZONE,
    NOT_A_TIME,
    RecordRefused,
    TimeWindow,
    check_time,
    check_times,
)
from ...core.refusal import Refusal
from ..inputs import is_unicode, one_of, shown, type_name
from ..ledger import LedgerOffline

STATUSES = ("ok", "error", "interrupted")
MODES = ("auto", "magic")
#: how a cell's GPU busy time was measured: the profiler's CUDA kernels (``--ops``)
BUSY_BY = ("profiler",)
MAX_CELLS_IN_MEMORY = 2000
#: the most a number in a record may be, by what it counts: beyond these a record is a
#: mistake (a cell over a million dollars, a century long), and bytes stay exact in a
#: browser's numbers (2**53)
MAX_AMOUNT = 1_000_000
MAX_SECONDS = 100 * 365 * 86400
MAX_JOULES = 1e15
MAX_BYTES = 2**53
MAX_GPUS = 64
#: a cell's times must lie between 2000 and a day after the server's clock, with a zone:
#: the rule is :mod:`jupyter_gpucost.core.record_rules`' (``EARLIEST``, ``MAX_AHEAD``)


def _required(key: str) -> str:
    return _("{key} is required").format(key=key)


def _text(record: dict[str, Any], key: str, *, required: bool, limit: int = 1024) -> str | None:
    value = record.get(key)
    if value is None or value == "":
        if required:
            raise Refusal(_required(key))
        return None
    if not isinstance(value, str):
        raise Refusal(
            _("{key} must be a string, not {what}").format(key=key, what=type_name(value))
        )
    if len(value) > limit:
        raise Refusal(
            _("{key} must be a string of at most {limit} characters, not {n}").format(
                key=key, limit=limit, n=len(value)
            )
        )
    if not is_unicode(value) or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise Refusal(_("{key} must be text without control characters").format(key=key))
    return value


def _number(
    record: dict[str, Any], key: str, *, required: bool, most: float = MAX_SECONDS
) -> float | None:
    value = record.get(key)
    if value is None:
        if required:
            raise Refusal(_required(key))
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refusal(
            _("{key} must be a finite number, not {what}").format(key=key, what=type_name(value))
        )
    try:
        number = float(value)
    except OverflowError:  # an integer too long for a float
        number = math.inf
    if not math.isfinite(number):
        raise Refusal(_("{key} must be a finite number").format(key=key))
    if number < 0:
        raise Refusal(_("{key} cannot be negative").format(key=key))
    if number > most:
        raise Refusal(
            _("{key} must be at most {most}, not {number}").format(
                key=key, most=f"{most:g}", number=f"{number:g}"
            )
        )
    return number


def _time(record: dict[str, Any], key: str, now: datetime) -> str:
    value = _text(record, key, required=True, limit=64)
    assert value is not None
    try:
        check_time(value, TimeWindow.plausible(now))
    except RecordRefused as e:
        if e.reason == NOT_A_TIME:
            text = _("{key} must be an ISO 8601 time, not {value}")
            raise Refusal(text.format(key=key, value=shown(value))) from None
        if e.reason == NO_TIME_ZONE:
            text = _("{key} must say its time zone (e.g. +00:00)")
            raise Refusal(text.format(key=key)) from None
        text = _(
            "{key} must be a time between {earliest} and a day from now ({latest} UTC), not {value}"
        )
        raise Refusal(
            text.format(
                key=key,
                earliest=f"{EARLIEST:%Y-%m-%d}",
                latest=f"{(now + MAX_AHEAD):%Y-%m-%d %H:%M}",
                value=shown(value),
            )
        ) from None
    return value


def _per_gpu(record: dict[str, Any], key: str, *, most: float) -> dict[str, float] | None:
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > MAX_GPUS:
        raise Refusal(
            _("{key} must be an object of at most {n} GPUs: GPU index -> number").format(
                key=key, n=MAX_GPUS
            )
        )
    out: dict[str, float] = {}
    for k, v in value.items():
        # ASCII digits: str.isdigit() also takes '²' and other scripts' digits
        if not (isinstance(k, str) and k.isascii() and k.isdigit() and len(k) <= 3):
            raise Refusal(
                _("{key} keys are GPU indices (0, 1, ...), not {value}").format(
                    key=key, value=shown(k)
                )
            )
        name = f"{key}[{k}]"
        number = _number({name: v}, name, required=True, most=most)
        assert number is not None
        out[str(int(k))] = number
    return out


def clean(
    record: object, *, kernel_id: str | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """The record as stored, or ``Refusal``; ``now``: the server's clock."""
    if not isinstance(record, dict):
        raise Refusal(
            _("the body must be a JSON object, not {what}").format(what=type_name(record))
        )
    status = record.get("status", "ok")
    if not isinstance(status, str) or status not in STATUSES:
        raise Refusal(one_of("status", STATUSES, status))
    mode = record.get("mode", "auto")
    if not isinstance(mode, str) or mode not in MODES:
        raise Refusal(one_of("mode", MODES, mode))
    busy_by = record.get("gpu_busy_by")
    if busy_by is not None and (not isinstance(busy_by, str) or busy_by not in BUSY_BY):
        raise Refusal(one_of("gpu_busy_by", BUSY_BY, busy_by))
    peak = _per_gpu(record, "peak_memory_bytes_by_gpu", most=MAX_BYTES)
    peak_total = record.get("peak_memory_bytes")
    if peak_total is not None:
        peak_total = int(_number(record, "peak_memory_bytes", required=True, most=MAX_BYTES) or 0)
    cell_id = _text(record, "cell_id", required=True, limit=200)
    notebook_path = _text(record, "notebook_path", required=False)
    recorded_kernel = _text(record, "kernel_id", required=False, limit=64) or kernel_id
    clock = now or datetime.now(UTC)
    started, ended = _time(record, "started", clock), _time(record, "ended", clock)
    cleaned: dict[str, Any] = {
        "cell_id": cell_id,
        "notebook_path": notebook_path,
        "kernel_id": recorded_kernel,
        "started": started,
        "ended": ended,
        "wall_s": _number(record, "wall_s", required=True),
        "cpu_s": _number(record, "cpu_s", required=False),
        "gpu_busy_s": _per_gpu(record, "gpu_busy_s", most=MAX_SECONDS),
        "gpu_busy_by": busy_by,
        "gpu_span_s": _per_gpu(record, "gpu_span_s", most=MAX_SECONDS),
        "peak_memory_bytes": peak_total,
        "peak_memory_bytes_by_gpu": peak,
        "energy_j": _number(record, "energy_j", required=False, most=MAX_JOULES),
        "cost_usd": _number(record, "cost_usd", required=True, most=MAX_AMOUNT),
        "rate_usd_per_hour": _number(record, "rate_usd_per_hour", required=False, most=MAX_AMOUNT),
        "status": status,
        "mode": mode,
    }
    try:
        check_times(started, ended, TimeWindow.plausible(clock))
    except RecordRefused:  # each time alone was checked above: the order is wrong
        raise Refusal(_("ended is before started")) from None
    return cleaned


#: a record's amounts, by the names records keep (in notebooks, the ledger, a kernel's
#: post) → their currency-neutral names in an answer (docs/api.md, "Money keys")
CELL_MONEY_KEYS = {"cost_usd": "cost", "rate_usd_per_hour": "rate_per_hour"}


def with_money_names(record: Mapping[str, object]) -> dict[str, object]:
    """A kept record as an answer lists it: as kept (its ``_usd`` names, deprecated in an
    answer) and each amount under its currency-neutral name too, with the same value. The
    record itself is left as it was."""
    out = dict(record)
    for old, new in CELL_MONEY_KEYS.items():
        if old in record:
            out[new] = record[old]
    return out


class CellLedger(Protocol):
    """Where cells are kept across restarts (the ledger)."""

    def add_cell(self, session_id: str, record: dict[str, Any]) -> None: ...

    def recent_cells(self, limit: int = 50) -> list[dict[str, Any]]: ...


class CellLog:
    """Recent cells in memory (for the badges), every cell in the ledger (for history)."""

    def __init__(self, ledger: CellLedger | None, session_id: str) -> None:
        self.ledger = ledger
        self.session_id = session_id
        self._recent: deque[dict[str, Any]] = deque(maxlen=MAX_CELLS_IN_MEMORY)
        self._lock = threading.Lock()
        #: cells run in this session (reported to the hub service)
        self.count = 0
        #: per kernel id: the machine's cost while its cells ran (micro-units) and how
        #: many cells, this session (the panel sets it beside the kernel's GPU use)
        self._by_kernel: dict[str, tuple[int, int]] = {}

    def add(self, record: dict[str, Any]) -> None:
        """Keep a cleaned record (blocking: the ledger write; call it off the loop)."""
        with self._lock:
            self._recent.append(record)
            self.count += 1
            kernel = record.get("kernel_id")
            if kernel:
                micro, cells = self._by_kernel.get(kernel, (0, 0))
                cost = round_micro(Fraction(str(record["cost_usd"])) * 1_000_000)
                self._by_kernel[kernel] = (micro + cost, cells + 1)
        if self.ledger is not None:
            self.ledger.add_cell(self.session_id, record)

    def by_kernel(self) -> dict[str, tuple[int, int]]:
        """Per kernel id, this session: the machine's cost while its cells ran (the sum of
        its cells' costs, in micro-units) and how many cells."""
        with self._lock:
            return dict(self._by_kernel)

    def in_memory(self, limit: int) -> list[dict[str, Any]]:
        """This server's newest cells, newest first (no ledger read)."""
        with self._lock:
            kept = list(self._recent)[-limit:]
        return kept[::-1]

    def recent(
        self, limit: int, *, cell_id: str | None = None, notebook_path: str | None = None
    ) -> list[dict[str, Any]]:
        """Newest first; this server's cells from memory, earlier ones from the ledger."""
        with self._lock:
            kept = list(self._recent)
        chosen = [
            r
            for r in reversed(kept)
            if (cell_id is None or r["cell_id"] == cell_id)
            and (notebook_path is None or r["notebook_path"] == notebook_path)
        ][:limit]
        if (
            len(chosen) < limit
            and cell_id is None
            and notebook_path is None
            and self.ledger is not None
            and len(kept) < MAX_CELLS_IN_MEMORY
        ):
            # earlier sessions' cells (this session's are already in memory)
            try:
                earlier = self.ledger.recent_cells(limit)
            except LedgerOffline:  # this session's, from memory, until the ledger is back
                earlier = []
            older = [r for r in earlier if r.get("session_id") != self.session_id]
            seen = {(r["cell_id"], r["ended"]) for r in chosen}
            for r in older:
                if (r.get("cell_id"), r.get("ended")) not in seen and len(chosen) < limit:
                    chosen.append(r)
        return chosen
