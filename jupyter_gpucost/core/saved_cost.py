"""The cost saved in a notebook file: ``metadata.gpucost`` of a cell and of the notebook.

Schema version 1 (documented in ``docs/headless.md``). Every amount is in the record's
``currency`` (the session's, an ISO 4217 code): the keys' ``_usd`` suffix is a historic
name kept for the files already written. A cell's record::

    {"version": 1, "cost_micro_usd": 1234, "cost_usd": "0.001234", "currency": "USD",
     "wall_s": 1.86, "gpu_busy_s": {"0": 1.2} (only where measured),
     "gpus": [{"name": "NVIDIA A10G", "usd_per_hour": "1.006"}],
     "base_usd_per_hour": "0", "rate_usd_per_hour": "1.006",
     "priced_by": "<where the prices come from>",
     "simulated": true, "simulated_by": "<the trace>" (only for simulated GPUs),
     "mode": "auto" | "magic", "status": "ok" | "error" | "interrupted",
     "started": "<ISO 8601>", "at": "<ISO 8601, when the cell ended>"}

The notebook's summary (``metadata.gpucost`` of the notebook) sums the records written in
one run: ``total_micro_usd`` is exactly the sum of the cells' ``cost_micro_usd`` (integer
micro-units of its ``currency``, never floats; one run prices in one currency), and
``by_gpu_micro_usd`` splits it by GPU model exactly.

A record read from a file is data someone sent: :func:`parse_cell` checks every field
(types, bounds, the cost against its rate and wall time) and answers with the reason it
refuses one; nothing refused is shown or summed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from .billing import cost_micro
from .i18n import N_
from .money import round_micro
from .record_rules import (
    RECORD_CURRENCY,
    RecordRefused,
    TimeWindow,
    check_currency,
    check_times,
)

SCHEMA_VERSION = 1
#: the key in a cell's and the notebook's metadata
METADATA_KEY = "gpucost"
#: the kernel publishes a cell's record as a display output with this MIME type; a runner
#: (or the front end) moves it into the cell's metadata
MIMETYPE = "application/vnd.jupyter-gpucost.cell+json"

#: a kernel with no jupyter-gpucost server: where its GPUs are read from, ``nvml`` (the
#: default), ``simulated`` (a replayed trace, labelled) or ``auto`` (NVML, else simulated)
ENV_TELEMETRY = "JUPYTER_GPUCOST_TELEMETRY"
#: the trace a simulated kernel replays (a shipped name or a file; the demo trace if unset)
ENV_TRACE = "JUPYTER_GPUCOST_SIMULATED_TRACE"
#: ``1``: the kernel prices every cell from the start (``%gpucost auto on`` without asking)
ENV_AUTO = "JUPYTER_GPUCOST_AUTO"
TELEMETRY_CHOICES = ("nvml", "simulated", "auto")
#: ``1``: the kernel detects its machine (the cloud's metadata service) and prices it as
#: the server would (a whole-instance price where the catalog has one)
ENV_DETECT = "JUPYTER_GPUCOST_DETECT_MACHINE"
#: where the machine's DMI files are (``/sys/class/dmi/id`` if unset)
ENV_DMI = "JUPYTER_GPUCOST_DMI_PATH"
#: the region whose catalog rows price a kernel with no server and no detected machine
#: (``us-east-1``); unset: the dearest region's rows, labelled an upper bound
ENV_REGION = "JUPYTER_GPUCOST_PRICE_REGION"

#: what no honest record exceeds (a trust boundary: a file can say anything)
MAX_COST_MICRO_USD = 10**15  # a billion dollars
MAX_WALL_S = 366 * 24 * 3600.0
MAX_RATE_USD_PER_HOUR = Decimal(1_000_000)
MAX_GPUS = 256
MAX_TEXT = 500
MODES = ("auto", "magic")
STATUSES = ("ok", "error", "interrupted")
#: the key of the instance's own (non-GPU) price in ``by_gpu_micro_usd``
BASE_KEY = "(instance)"

#: why a record is refused (translated where it is shown)
NOT_AN_OBJECT = N_("not an object")
UNKNOWN_VERSION = N_("unknown schema version")
BAD_FIELD = N_("a field is missing or out of range")
COST_MISMATCH = N_("its cost does not match its rate and wall time")


@dataclass(frozen=True)
class SavedGpu:
    name: str
    usd_per_hour: Decimal | None


@dataclass(frozen=True)
class SavedCell:
    """One cell's cost as it is kept in the notebook."""

    cost_micro_usd: int
    wall_s: float
    rate_usd_per_hour: Decimal
    gpus: tuple[SavedGpu, ...]
    base_usd_per_hour: Decimal
    priced_by: str
    mode: str
    status: str
    started: str
    at: str
    simulated: bool = False
    simulated_by: str = ""
    gpu_busy_s: dict[str, float] | None = None
    currency: str = RECORD_CURRENCY

    def to_json(self) -> dict[str, object]:
        """The record as the notebook keeps it: its keys always in this order, and the
        optional ones (``gpu_busy_s``, ``simulated``, ``simulated_by``) only where they say
        something (a reader takes their absence as null, false and empty)."""
        out: dict[str, Any] = {
            "version": SCHEMA_VERSION,
            "cost_micro_usd": self.cost_micro_usd,
            "cost_usd": str(Decimal(self.cost_micro_usd) / 1_000_000),
            "currency": self.currency,
            "wall_s": self.wall_s,
        }
        if self.gpu_busy_s:
            out["gpu_busy_s"] = self.gpu_busy_s
        out |= {
            "gpus": [
                {"name": g.name, "usd_per_hour": _text_or_none(g.usd_per_hour)} for g in self.gpus
            ],
            "base_usd_per_hour": str(self.base_usd_per_hour),
            "rate_usd_per_hour": str(self.rate_usd_per_hour),
            "priced_by": self.priced_by,
        }
        if self.simulated:
            out |= {"simulated": True, "simulated_by": self.simulated_by}
        out |= {"mode": self.mode, "status": self.status, "started": self.started, "at": self.at}
        return out

    def by_gpu_micro_usd(self) -> dict[str, int]:
        """The cell's cost split by GPU model (and the instance's base price), exactly:
        the parts are proportional to the prices and add up to ``cost_micro_usd``."""
        weights: dict[str, Decimal] = {}
        for g in self.gpus:
            if g.usd_per_hour is not None and g.usd_per_hour > 0:
                weights[g.name] = weights.get(g.name, Decimal(0)) + g.usd_per_hour
        if self.base_usd_per_hour > 0:
            weights[BASE_KEY] = weights.get(BASE_KEY, Decimal(0)) + self.base_usd_per_hour
        return split_exactly(self.cost_micro_usd, weights)


def _text_or_none(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def split_exactly(total: int, weights: Mapping[str, Decimal]) -> dict[str, int]:
    """``total`` split in proportion to ``weights``, largest remainders first; the parts
    are integers that add up to ``total``. With no positive weight, all goes to
    :data:`BASE_KEY`."""
    positive = {k: w for k, w in weights.items() if w > 0}
    if total == 0:
        return {}
    if not positive:
        return {BASE_KEY: total}
    whole = sum(positive.values(), Decimal(0))
    shares = {k: Decimal(total) * w / whole for k, w in positive.items()}
    parts = {k: int(s) for k, s in shares.items()}  # non-negative: floor
    left = total - sum(parts.values())
    for k in sorted(shares, key=lambda k: (parts[k] - shares[k], k))[:left]:
        parts[k] += 1
    return parts


def expected_cost_micro(rate_per_hour: Decimal, wall_s: float) -> int:
    """The meter's cost of a cell: its wall time at the rate in force (the kernel's rule)."""
    return round_micro(cost_micro(rate_per_hour, round(wall_s * 1_000_000)))


#: a record that is not ours or not sound (``reason``: an ``N_`` constant); the one error
#: of :mod:`.record_rules`, so a caller catches every refusal with it
Refused = RecordRefused


def _decimal(value: object, *, allow_none: bool = False) -> Decimal | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or len(value) > 40:
        raise Refused(BAD_FIELD)
    try:
        d = Decimal(value)
    except InvalidOperation:
        raise Refused(BAD_FIELD) from None
    if not d.is_finite() or d < 0 or d > MAX_RATE_USD_PER_HOUR:
        raise Refused(BAD_FIELD)
    return d


def _text(value: object, *, choices: tuple[str, ...] | None = None) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise Refused(BAD_FIELD)
    if choices is not None and value not in choices:
        raise Refused(BAD_FIELD)
    return value


def _time_text(value: object) -> str:
    text = _text(value)
    if len(text) > 64:
        raise Refused(BAD_FIELD)
    return text


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refused(BAD_FIELD)
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_WALL_S:
        raise Refused(BAD_FIELD)
    return seconds


def parse_cell(value: object, *, now: datetime | None = None) -> SavedCell:
    """A cell's record read from a notebook, checked field by field; :class:`Refused` when
    it is not a sound version-1 record. Its times must say their zone and be plausible
    (:mod:`.record_rules`; ``now``: the reader's clock)."""
    if not isinstance(value, Mapping):
        raise Refused(NOT_AN_OBJECT)
    if value.get("version") != SCHEMA_VERSION or isinstance(value.get("version"), bool):
        raise Refused(UNKNOWN_VERSION)
    cost = value.get("cost_micro_usd")
    if isinstance(cost, bool) or not isinstance(cost, int) or not 0 <= cost <= MAX_COST_MICRO_USD:
        raise Refused(BAD_FIELD)
    currency = check_currency(value.get("currency"))
    wall_s = _seconds(value.get("wall_s"))
    rate = _decimal(value.get("rate_usd_per_hour")) or Decimal(0)
    base = _decimal(value.get("base_usd_per_hour")) or Decimal(0)
    raw_gpus = value.get("gpus")
    if not isinstance(raw_gpus, list) or len(raw_gpus) > MAX_GPUS:
        raise Refused(BAD_FIELD)
    gpus = []
    for g in raw_gpus:
        if not isinstance(g, Mapping):
            raise Refused(BAD_FIELD)
        price = _decimal(g.get("usd_per_hour"), allow_none=True)
        gpus.append(SavedGpu(_text(g.get("name")), price))
    busy = value.get("gpu_busy_s")
    gpu_busy_s: dict[str, float] | None = None
    if busy is not None:
        if not isinstance(busy, Mapping) or len(busy) > MAX_GPUS:
            raise Refused(BAD_FIELD)
        gpu_busy_s = {_text(k): _seconds(v) for k, v in busy.items()}
    simulated = value.get("simulated", False)
    if not isinstance(simulated, bool):
        raise Refused(BAD_FIELD)
    cell = SavedCell(
        cost_micro_usd=cost,
        wall_s=wall_s,
        rate_usd_per_hour=rate,
        gpus=tuple(gpus),
        base_usd_per_hour=base,
        priced_by=_text(value.get("priced_by")),
        mode=_text(value.get("mode"), choices=MODES),
        status=_text(value.get("status"), choices=STATUSES),
        started=_time_text(value.get("started")),
        at=_time_text(value.get("at")),
        simulated=simulated,
        simulated_by=_text(value.get("simulated_by", "")),
        gpu_busy_s=gpu_busy_s,
        currency=currency,
    )
    check_times(cell.started, cell.at, TimeWindow.plausible(now or datetime.now(UTC)))
    # the rate is the GPUs' prices plus the base price, and the cost is the wall time at
    # that rate (one micro-dollar of slack for the wall time's rounding to 6 decimals)
    if sum((g.usd_per_hour or Decimal(0) for g in cell.gpus), base) != rate:
        raise Refused(COST_MISMATCH)
    if abs(expected_cost_micro(rate, wall_s) - cost) > 1:
        raise Refused(COST_MISMATCH)
    return cell


@dataclass
class NotebookSummary:
    """The notebook's ``metadata.gpucost``: the cells priced in one run, summed exactly."""

    cells: int = 0
    total_micro_usd: int = 0
    by_gpu_micro_usd: dict[str, int] = field(default_factory=dict)
    #: the currency of every amount (the run's: the records it sums are all in it)
    currency: str = RECORD_CURRENCY
    price_sources: list[str] = field(default_factory=list)
    simulated: bool = False
    simulated_by: str = ""
    first_started: str = ""
    last_at: str = ""
    runner: str = ""
    #: cells whose saved record was refused (index, reason), never summed
    ignored: list[dict[str, Any]] = field(default_factory=list)
    #: where a budgeted run stopped, if it did
    stopped: dict[str, Any] | None = None
    #: the run's cost as the runner metered it (``jupyter gpucost run``): at least the sum
    #: of the cells, with what no cell's record holds
    metered: dict[str, Any] | None = None

    def add(self, cell: SavedCell) -> None:
        """Add a cell's record, in the summary's currency (never two currencies summed:
        :class:`Refused` otherwise)."""
        check_currency(cell.currency, self.currency)
        self.cells += 1
        self.total_micro_usd += cell.cost_micro_usd
        for key, micro in cell.by_gpu_micro_usd().items():
            self.by_gpu_micro_usd[key] = self.by_gpu_micro_usd.get(key, 0) + micro
        if cell.priced_by and cell.priced_by not in self.price_sources:
            self.price_sources.append(cell.priced_by)
        if cell.simulated:
            self.simulated = True
            self.simulated_by = cell.simulated_by or self.simulated_by
        if not self.first_started or cell.started < self.first_started:
            self.first_started = cell.started
        if cell.at > self.last_at:
            self.last_at = cell.at

    def to_json(self) -> dict[str, object]:
        out: dict[str, Any] = {
            "version": SCHEMA_VERSION,
            "total_micro_usd": self.total_micro_usd,
            "total_usd": str(Decimal(self.total_micro_usd) / 1_000_000),
            "currency": self.currency,
            "cells": self.cells,
            "by_gpu_micro_usd": dict(sorted(self.by_gpu_micro_usd.items())),
            "price_sources": list(self.price_sources),
            "simulated": self.simulated,
            "simulated_by": self.simulated_by,
            "started": self.first_started,
            "at": self.last_at,
            "runner": self.runner,
        }
        if self.ignored:
            out["ignored"] = list(self.ignored)
        if self.stopped is not None:
            out["stopped"] = dict(self.stopped)
        if self.metered is not None:
            out["metered"] = dict(self.metered)
        return out


def summarise(
    cells: Iterable[SavedCell], runner: str = "", currency: str = RECORD_CURRENCY
) -> NotebookSummary:
    summary = NotebookSummary(runner=runner, currency=currency)
    for cell in cells:
        summary.add(cell)
    return summary
