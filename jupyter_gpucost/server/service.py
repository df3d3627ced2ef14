"""The server's cost service, free of tornado: configuration, source, meter, sampler."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from http import HTTPStatus
from pathlib import Path
from typing import Literal, Protocol
from zoneinfo import ZoneInfo

from ..core import wire
from ..core.billing import BillingRule
from ..core.catalog import Catalog, PricePolicy
from ..core.currency import DEFAULT_CURRENCY
from ..core.currency import symbol as currency_symbol
from ..core.focus import billed_machine
from ..core.instance_prices import PricePlan
from ..core.machine import Machine
from ..core.meter import Meter
from ..core.metering import Metering, metering
from ..core.money import json_amount
from ..core.protocol import ENV_PRICES, PricedGpu, PublishedPrices, encode_prices
from ..core.refusal import Refusal
from ..core.sql import sqlite_path
from ..telemetry.base import TelemetrySource
from ..telemetry.opening import open_source
from .gpu_use.attribution import Attributor
from .gpu_use.gpu_claims import ClaimBook
from .gpu_use.kernel_procs import KernelTracker
from .gpu_use.payload import kernels_payload
from .ledger import (
    BillCache,
    BillFigure,
    Ledger,
    LedgerOffline,
    LedgerUnavailable,
    default_url,
    new_session_id,
)
from .ledger.journal import Journal
from .record import history as hist
from .record.cells import CellLog
from .record.history import HistoryRing
from .record.metrics import Metrics
from .record.recorder import Recorder
from .sampler import Sampler, monotonic_us, utc_now
from .status import StatusInputs, status_document
from .status_ledger import LedgerFacts, ledger_json, ledger_unreachable

TELEMETRY_MODES = ("auto", "nvml", "simulated", "none")


@dataclass(frozen=True)
class CostConfig:
    """Everything the service needs, already validated (see ``app.GpuCost``)."""

    telemetry: str = "auto"
    sample_interval_s: float = 1.0
    catalog: Catalog | None = None
    provider: str = "aws"
    market: str = "on-demand"
    instance: str = ""
    overrides: Mapping[str, Decimal] = field(default_factory=dict)
    #: the price of a GPU no catalog price fits, in the session's currency (``None``: the
    #: dearest GPU of the catalog in that currency)
    unknown_gpu_per_hour: Decimal | None = None
    granularity_s: int = 1
    minimum_charge_s: int = 60
    base_per_hour: Decimal = Decimal(0)
    #: ISO 4217 code; empty: the provider's (:func:`with_session_currency` resolves it)
    currency: str = ""
    #: empty: the currency's own symbol
    currency_symbol: str = ""
    simulated_trace: str = ""
    #: SQLAlchemy URL of the ledger; empty: SQLite in ``data_dir``; "none": no ledger
    ledger_url: str = ""
    data_dir: str = ""
    ledger_flush_interval_s: float = 5.0
    #: IANA zone for "today" and "this month"; empty: the server's local time
    ledger_timezone: str = ""
    #: how long a clean stop waits for a ledger that cannot be reached
    ledger_stop_wait_s: float = 10.0
    carbon_intensity_g_per_kwh: float = 475.0
    #: the detected machine (``None``: none, or detection is off)
    machine: Machine | None = None
    #: how the prices were chosen (``None``: from the settings alone)
    plan: PricePlan | None = None


class BudgetDocument(Protocol):
    """The budget as the status document shows it (``budget.BudgetController``)."""

    def payload(self) -> dict[str, object]: ...


def with_session_currency(config: CostConfig, catalog: Catalog) -> CostConfig:
    """The configuration with the session's currency and symbol filled in: the admin's, else
    the price provider's currency and that currency's symbol."""
    code = config.currency or catalog.currency_of(config.provider)
    return replace(
        config, currency=code, currency_symbol=config.currency_symbol or currency_symbol(code)
    )


def whole_without_gpus(config: CostConfig, source: TelemetrySource) -> str | None:
    """The detected instance to price whole when the opened source sees no GPU (``None``:
    it sees some, or the machine has no whole-instance price). A simulated trace is never
    the machine's own GPUs: it is not asked."""
    whole = None if config.plan is None else config.plan.whole
    if whole is None or source.simulated or source.read():
        return None
    return whole.row.instance


class CostService:
    def __init__(self, config: CostConfig, *, log: logging.Logger | None = None) -> None:
        self.log = log or logging.getLogger("jupyter_gpucost")
        catalog = config.catalog
        if catalog is None:
            raise ValueError("CostConfig.catalog is required")
        config = with_session_currency(config, catalog)
        self.config = config
        self.policy = PricePolicy(
            catalog=catalog,
            provider=config.provider,
            market=config.market,
            instance=config.instance,
            overrides=dict(config.overrides),
            whole=None
            if config.plan is None or config.plan.whole is None
            else {config.plan.whole.row.gpu_model: config.plan.whole.per_gpu},
            currency=config.currency,
            unknown_gpu_price=config.unknown_gpu_per_hour,
            region="" if config.plan is None else config.plan.region,
        )
        self.rule = BillingRule(config.granularity_s, config.minimum_charge_s)
        self.source = open_source(
            config.telemetry, simulated_trace=config.simulated_trace, log=self.log
        )
        #: the detected instance priced whole because no GPU is seen (it bills whether or
        #: not NVML answers); ``None``: GPUs are seen, or there is no whole-instance price
        self.whole_without_gpus = whole_without_gpus(config, self.source)
        base = config.base_per_hour
        if self.whole_without_gpus is not None and config.plan and config.plan.whole:
            base = config.plan.whole.row.per_hour
            self.log.warning(
                "jupyter-gpucost: no GPU is seen; the %s is priced whole from its instance, "
                "%s %s/h",
                self.whole_without_gpus,
                base,
                config.currency,
            )
        self.meter = Meter(
            policy=self.policy,
            rule=self.rule,
            sample_interval_s=config.sample_interval_s,
            start_us=monotonic_us(),
            started=utc_now(),
            base_per_hour=base,
        )
        self.sampler = Sampler(
            self.source, self.meter, interval_s=config.sample_interval_s, log=self.log
        )
        #: the budget, whose document the status shows (``attach_budget``)
        self.budget: BudgetDocument | None = None
        started = self.meter.snapshot().started
        self.session_id = new_session_id(started)
        self.ledger_error: str | None = None
        self.ledger = self._open_ledger()
        self._bill = BillCache()
        user = os.environ.get("JUPYTERHUB_USER") or None
        self.cells = CellLog(self.ledger, self.session_id)
        self.tracker = KernelTracker(log=self.log)
        #: the GPU processes kernels identified as theirs (NVML's pids in a container)
        self.claims = ClaimBook(interval_s=config.sample_interval_s)
        self.attributor = Attributor(simulated=self.source.simulated, claims=self.claims)
        self.ring = HistoryRing()
        self.recorder = Recorder(
            ledger=self.ledger,
            session_id=self.session_id,
            flush_interval_s=config.ledger_flush_interval_s,
            tracker=self.tracker,
            attributor=self.attributor,
            ring=self.ring,
            log=self.log,
            journal=self._journal(),
            started=(started, user),
        )
        self.sampler.listeners.append(self.recorder.on_sample)
        self.metrics = Metrics(self.session_id, currency=config.currency)
        self.recorder.listeners.append(self.metrics.on_sample)

    def _open_ledger(self) -> Ledger | None:
        config = self.config
        if config.ledger_url.strip().lower() == "none":
            return None
        url = config.ledger_url or default_url(config.data_dir or ".")
        tz = ZoneInfo(config.ledger_timezone) if config.ledger_timezone else None
        # under JupyterHub, the ledger reads this user's sessions only (a shared ledger)
        user = os.environ.get("JUPYTERHUB_USER") or None
        try:
            # a ledger that cannot be reached now is tried again at every flush
            ledger = Ledger(url, tz=tz, log=self.log, user=user, offline_ok=True)
        except LedgerUnavailable as e:
            self.ledger_error = str(e)
            self.log.warning(
                "jupyter-gpucost: no ledger (%s): session totals only; today, this month "
                "and history older than an hour are not kept.",
                e,
            )
            return None
        except Exception as e:  # a database server down, a bad URL: never stop the server
            self.ledger_error = f"{type(e).__name__}: {e}"
            self.log.warning("jupyter-gpucost: cannot open the ledger: %s", e)
            return None
        # a ledger that cannot be reached: written with the first flush once it is back
        with contextlib.suppress(LedgerOffline):
            ledger.start_session(self.session_id, self.meter.snapshot().started, user)
            if config.machine is not None:
                # what a bill is matched by (jupyter gpucost reconcile)
                ledger.record_machine(self.session_id, config.machine, self.policy.session_currency)
        return ledger

    def _journal(self) -> Journal | None:
        """The local journal of a remote ledger (``None``: a SQLite file, or none)."""
        if self.ledger is None or sqlite_path(self.ledger.url) is not None:
            return None
        folder = os.path.join(self.config.data_dir or ".", "gpucost", "journal")
        return Journal(Path(folder), self.log)

    def start(self) -> None:
        # one reading now, so the first request already knows the GPUs
        self.sampler.sample_once()
        self._log_upper_bounds()
        self.recorder.start()
        self.sampler.start()

    def publish_prices(self, environ: dict[str, str] | os._Environ[str]) -> None:
        """Put the prices in force where kernels started from now on will find them."""
        environ[ENV_PRICES] = encode_prices(self.prices_in_force())

    def prices_in_force(self) -> PublishedPrices:
        """The prices in force, as kernels price their cells (``GET kernels/prices``): the
        meter's own, so a price read again applies at once."""
        published = self.sampler.latest
        telemetry = published.telemetry
        prices, base = self.sampler.prices()
        return PublishedPrices(
            gpus=tuple(
                PricedGpu(
                    g.uuid,
                    g.name,
                    None if (p := prices.get(g.uuid, g.price)) is None else p.per_gpu_hour,
                    bound_msgid="" if p is None else p.reason_msgid,
                    bound_values=() if p is None else p.reason_values,
                )
                for g in published.snapshot.gpus
            ),
            base_per_hour=base,
            currency_symbol=self.config.currency_symbol,
            source=f"the server's {self.policy.provider} {self.policy.market} prices",
            simulated=telemetry.simulated,
            simulated_by=telemetry.detail.get("trace", "") if telemetry.simulated else "",
            currency=self.config.currency or DEFAULT_CURRENCY,
        )

    def _log_upper_bounds(self) -> None:
        # called once, after the first reading: the set of GPUs is fixed when the source opens
        for gpu in self.sampler.latest.snapshot.gpus:
            if gpu.price is not None and gpu.price.upper_bound:
                self.log.warning(
                    "jupyter-gpucost: GPU %d (%s) is priced at an upper bound, %s %s/h: %s. "
                    "Set c.GpuCost.price_overrides = {%r: <%s per hour>} for its real price.",
                    gpu.index,
                    gpu.name,
                    gpu.price.per_gpu_hour,
                    gpu.price.currency,
                    gpu.price.reason,
                    gpu.model or gpu.name,
                    self.policy.session_currency,
                )

    def metering(self) -> Metering:
        """Whether a GPU is metered, the machine priced whole, or the cost unknown."""
        published = self.sampler.latest
        return metering(
            len(published.snapshot.gpus),
            telemetry_reason=published.telemetry.reason,
            whole_instance=self.whole_without_gpus,
        )

    def attach_budget(self, budget: BudgetDocument) -> None:
        """The budget whose document the status shows (set by the extension app)."""
        self.budget = budget

    def status(self) -> wire.StatusDocument:
        """The status document (:func:`status.status_document`) of the latest sample."""
        published = self.sampler.latest
        snapshot = published.snapshot
        return status_document(
            StatusInputs(
                snapshot=snapshot,
                telemetry=published.telemetry,
                policy=self.policy,
                rule=self.rule,
                currency=self.config.currency or DEFAULT_CURRENCY,
                currency_symbol=self.config.currency_symbol,
                session_id=self.session_id,
                totals=self.recorder.totals(snapshot),
                ledger=self.ledger_facts(),
                carbon_intensity_g_per_kwh=self.config.carbon_intensity_g_per_kwh,
                peak_memory_bytes=self.recorder.peak_memory_bytes,
                attribution=self.attributor.latest,
                budget=None if self.budget is None else self.budget.payload(),
                machine=self.config.machine,
                plan=self.config.plan,
                metering=self.metering(),
                bill=self.bill(),
            )
        )

    def bill(self) -> BillFigure | None:
        """This machine's reconciled bill (read from the ledger at most once a minute)."""
        machine = self.config.machine
        if self.ledger is None or machine is None:
            return None
        return self._bill.figure(self.ledger.reconciled, billed_machine(machine).key)

    def reprice(self, plan: PricePlan) -> None:
        """Price with ``plan`` from now on (a rental's billed rate read again): what was
        metered keeps its price; the status shows the new plan."""
        whole = plan.whole
        self.policy = replace(
            self.policy, whole=None if whole is None else {whole.row.gpu_model: whole.per_gpu}
        )
        if whole is None:
            base = self.config.base_per_hour
        elif self.whole_without_gpus is not None:
            base = whole.row.per_hour
        else:
            base = whole.base_per_hour
        self.sampler.reprice(self.policy, base)
        self.config = replace(self.config, plan=plan)

    def ledger_facts(self) -> LedgerFacts:
        if self.ledger is None:
            return LedgerFacts(enabled=False, error=self.ledger_error)
        unwritten = self.recorder.unwritten(self.sampler.latest.snapshot.as_of.timestamp())
        return LedgerFacts(
            enabled=True,
            url=self.ledger.safe_url,
            flush_interval_s=self.config.ledger_flush_interval_s,
            timezone=self.config.ledger_timezone or "server local time",
            reset=self.ledger.reset,
            down_since=self.ledger.down_since,
            down_error=self.ledger.error,
            unwritten_s=unwritten.seconds,
            unwritten_micro=unwritten.cost_micro,
            journaled=unwritten.journaled,
            tz=self.ledger.tz,
        )

    def ledger_unavailable(self) -> Refusal:
        """The 503 of a route that needs the ledger while it cannot be reached."""
        ledger = self.ledger
        return Refusal(
            ledger_unreachable(
                None if ledger is None else ledger.down_since,
                None if ledger is None else ledger.tz,
            ),
            HTTPStatus.SERVICE_UNAVAILABLE,
        )

    def ledger_state(self) -> wire.LedgerState:
        return ledger_json(self.ledger_facts())

    def kernels(self) -> wire.KernelsDocument:
        """Per-kernel cost; kernels + unattributed + idle == total, exactly."""
        return kernels_payload(
            self.attributor.latest, self.tracker.trees(), self.cells.by_kernel(), time.time()
        )

    def newest_point(self) -> wire.HistoryPoint | None:
        """The newest point of the history's 5-second step (in memory), or ``None``."""
        snapshot = self.sampler.latest.snapshot
        end_s = snapshot.as_of.timestamp()
        step_s = hist.STEPS_S["5s"]
        start_s = end_s - step_s
        points = hist.from_ring(
            self.ring.since(start_s), start_s, end_s, step_s, [g.index for g in snapshot.gpus]
        )
        return points[-1] if points else None

    def session_cells(self, limit: int) -> list[dict[str, object]]:
        """This session's newest cells, newest first (in memory: no ledger read)."""
        return self.cells.in_memory(limit)

    def history(self, window: str | None, step: str | None) -> wire.HistoryDocument:
        """Spend rate and readings over a window (raises a 400 :class:`Refusal` on bad input,
        a 503 when it needs the ledger while it cannot be reached)."""
        try:
            return self._history(window, step)
        except LedgerOffline:
            raise self.ledger_unavailable() from None

    def _history(self, window: str | None, step: str | None) -> wire.HistoryDocument:
        window_s = hist.parse_window(window)
        step_s = hist.parse_step(step, window_s)
        snapshot = self.sampler.latest.snapshot
        end_s = snapshot.as_of.timestamp()
        start_s = end_s - window_s
        gpu_indexes = [g.index for g in snapshot.gpus]
        oldest = self.ring.oldest()
        if window_s <= hist.RING_S or self.ledger is None:
            if self.ledger is None and window_s > hist.RING_S:
                step_s = max(step_s, 60)
            points = hist.from_ring(self.ring.since(start_s), start_s, end_s, step_s, gpu_indexes)
            source: Literal["memory", "ledger"] = "memory"
        else:
            self.recorder.flush_if_stale()
            points = hist.from_ledger(
                self.ledger, start_s, end_s, step_s, gpu_indexes, self.session_id
            )
            source = "ledger"
        totals: wire.HistoryTotals
        try:
            totals = self._ledger_totals(snapshot.as_of, snapshot.cost_micro)
        except LedgerOffline:
            if source == "ledger":
                raise
            # the window is in memory: its points stand; the totals say why they are empty
            totals = {
                "sessions": [],
                "days": [],
                "unavailable": str(self.ledger_unavailable()),
            }
        return {
            "window_s": window_s,
            "step_s": step_s,
            "start": datetime.fromtimestamp(start_s, UTC).isoformat(),
            "end": datetime.fromtimestamp(end_s, UTC).isoformat(),
            "source": source,
            "oldest_in_memory": None
            if oldest is None
            else datetime.fromtimestamp(oldest, UTC).isoformat(),
            "gpus": [{"index": g.index, "name": g.name} for g in snapshot.gpus],
            "points": points,
            "totals": totals,
        }

    def _ledger_totals(self, as_of: datetime, live_micro: int) -> wire.HistoryTotals:
        """The history's sessions and days from the ledger (:class:`LedgerOffline` while
        it cannot be reached)."""
        totals: wire.HistoryTotals = {"sessions": [], "days": []}
        if self.ledger is not None:
            for row in self.ledger.sessions():
                live = row["id"] == self.session_id
                cost = json_amount(live_micro if live else row["cost_micro"])
                totals["sessions"].append(
                    {
                        "id": row["id"],
                        "started": datetime.fromtimestamp(row["started_unix_s"], UTC).isoformat(),
                        "ended": None
                        if row["ended_unix_s"] is None
                        else datetime.fromtimestamp(row["ended_unix_s"], UTC).isoformat(),
                        "cost": cost,
                        "cost_usd": cost,  # deprecated twin (docs/api.md, "Money keys")
                    }
                )
            totals["days"] = [
                {"date": day.isoformat(), "cost": json_amount(cost), "cost_usd": json_amount(cost)}
                for day, cost in self.ledger.days(as_of)
            ]
        return totals

    def stop(self) -> None:
        self.sampler.stop()
        self.recorder.stop(self.config.ledger_stop_wait_s)
        if self.ledger is not None:
            self.ledger.close()
