"""The server's cost service, free of tornado: configuration, source, meter, sampler."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .billing import BillingRule
from .meter import Meter
from .prices import Catalog, PricePolicy
from .sampler import Sampler, monotonic_us, utc_now
from .status import status_payload
from .telemetry.base import NoTelemetry, SourceUnavailable, TelemetrySource
from .telemetry.simulated import SimulatedSource

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
    granularity_s: int = 1
    minimum_charge_s: int = 60
    base_usd_per_hour: Decimal = Decimal(0)
    currency: str = "USD"
    currency_symbol: str = "$"
    simulated_trace: str = ""


def open_source(mode: str, *, simulated_trace: str = "", log: logging.Logger) -> TelemetrySource:
    """Open the telemetry source for ``mode``; never raises: failures become NoTelemetry."""
    if mode == "none":
        return NoTelemetry("GPU telemetry is turned off (c.GpuCost.telemetry = 'none')")
    if mode == "simulated":
        source: TelemetrySource = SimulatedSource(simulated_trace or None)
    else:
        from .telemetry.nvml import NvmlSource

        source = NvmlSource(log=log)
    try:
        source.open()
    except SourceUnavailable as e:
        if mode == "auto":
            log.info("jupyter-gpucost: no NVML (%s); GPU telemetry is off", e.reason)
            return NoTelemetry(f"no NVIDIA GPU telemetry: {e.reason}")
        log.error("jupyter-gpucost: %s telemetry unavailable: %s", mode, e.reason)
        return NoTelemetry(e.reason)
    log.info("jupyter-gpucost: telemetry from %s", source.name)
    return source


class CostService:
    def __init__(self, config: CostConfig, *, log: logging.Logger | None = None) -> None:
        self.config = config
        self.log = log or logging.getLogger("jupyter_gpucost")
        if config.catalog is None:
            raise ValueError("CostConfig.catalog is required")
        self.policy = PricePolicy(
            catalog=config.catalog,
            provider=config.provider,
            market=config.market,
            instance=config.instance,
            overrides=dict(config.overrides),
        )
        self.rule = BillingRule(config.granularity_s, config.minimum_charge_s)
        self.source = open_source(
            config.telemetry, simulated_trace=config.simulated_trace, log=self.log
        )
        self.meter = Meter(
            policy=self.policy,
            rule=self.rule,
            sample_interval_s=config.sample_interval_s,
            start_us=monotonic_us(),
            started=utc_now(),
            base_usd_per_hour=config.base_usd_per_hour,
        )
        self.sampler = Sampler(
            self.source, self.meter, interval_s=config.sample_interval_s, log=self.log
        )
        #: the budget controller (jupyter_gpucost.budget), set by the extension app
        self.budget: Any = None

    def start(self) -> None:
        # one reading now, so the first request already knows the GPUs
        self.sampler.sample_once()
        self._log_unpriced()
        self.sampler.start()

    def _log_unpriced(self) -> None:
        # called once, after the first reading: the set of GPUs is fixed when the source opens
        for gpu in self.sampler.latest.snapshot.unpriced:
            self.log.warning(
                "jupyter-gpucost: no %s %s price for GPU %d (%s): it is NOT counted in "
                "the cost. Set c.GpuCost.price_overrides = {%r: <USD per hour>}.",
                self.policy.provider,
                self.policy.market,
                gpu.index,
                gpu.name,
                gpu.model or gpu.name,
            )

    def status(self) -> dict[str, Any]:
        published = self.sampler.latest
        payload = status_payload(
            published.snapshot,
            published.telemetry,
            policy=self.policy,
            rule=self.rule,
            currency=self.config.currency,
            currency_symbol=self.config.currency_symbol,
        )
        payload["budget"] = self.budget.payload() if self.budget is not None else None
        return payload

    def stop(self) -> None:
        self.sampler.stop()
