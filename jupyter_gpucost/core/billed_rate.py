"""The rate a provider says it bills this very rental, and how it is shown.

Vast.ai (an instance's ``dph_total``), RunPod (a pod's ``costPerHr``) and Lambda (its
instance type's ``price_cents_per_hour``) tell the instance what it is billed per hour; the
adapters in :mod:`jupyter_gpucost.cloud` read it (:mod:`~jupyter_gpucost.cloud.vast_rate`,
:mod:`~jupyter_gpucost.cloud.runpod_rate`, :mod:`~jupyter_gpucost.cloud.lambda_cloud`) and
hand the figures here. Pure rules, no I/O:

* :func:`parse_usd_per_hour`: a number the answer gave, or why it is refused (a string, a
  boolean, NaN, infinite, zero, negative);
* :func:`check_plausible`: a rate far from what the catalog knows for that GPU is refused,
  never billed: under :data:`FLOOR_FRACTION` of the cheapest row of the model (any
  provider, any market, US dollars) per GPU, or over :data:`CEILING_FACTOR` times its
  dearest. A GPU the catalog does not know cannot be checked, and is refused;
* :func:`billed_plan`: the price plan with the rental priced whole at that rate
  (:data:`BASIS_BILLED`), the catalog's plan staying where the rate is refused;
* :func:`rate_label`: "billed rate from Vast.ai, read 14:02 UTC", the one wording of the
  basis wherever it is shown.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from .catalog import BASIS_BILLED, Catalog
from .gpu_models import model_for
from .i18n import N_
from .instance_prices import InstanceRow, PricePlan, whole_instance
from .money import MICRO

#: a rate under this fraction of the cheapest catalog price of its GPUs is refused
FLOOR_FRACTION = Fraction(1, 4)
#: a rate over this many times the dearest catalog price of its GPUs is refused
CEILING_FACTOR = 4
#: the providers whose API tells the billed rate, as people write them
PROVIDER_NAMES = {"vast": "Vast.ai", "runpod": "RunPod", "lambda": "Lambda"}
#: the basis as shown (``{provider}``: :data:`PROVIDER_NAMES`; ``{time}``: HH:MM UTC)
LABEL = N_("billed rate from {provider}, read {time} UTC")


class RateRefused(ValueError):
    """No billed rate can be used; the message says why (for the log)."""


@dataclass(frozen=True)
class BilledRate:
    """What the provider said this rental costs per hour, all in."""

    provider: str
    usd_per_hour: Decimal
    #: when it was read (UTC)
    read_at: datetime
    #: the catalog's model of its GPUs and how many it has
    gpu_model: str
    gpus: int
    instance_id: str
    #: what the answer called its GPUs, or the instance type (for the source sentence)
    detail: str = ""

    def source(self) -> str:
        """Where the figure comes from, in English (the price's source, the log)."""
        name = PROVIDER_NAMES.get(self.provider, self.provider)
        what = f" ({self.detail})" if self.detail else ""
        return (
            f"billed rate from {name} for instance {self.instance_id}{what}: "
            f"{self.usd_per_hour} USD/h, read {self.read_at.isoformat()}"
        )


def rate_label(provider: str, read_at: datetime, translate: Callable[[str], str]) -> str:
    """ "billed rate from Vast.ai, read 14:02 UTC" in the language of ``translate``."""
    when = read_at.astimezone(UTC) if read_at.tzinfo else read_at.replace(tzinfo=UTC)
    return translate(LABEL).format(
        provider=PROVIDER_NAMES.get(provider, provider), time=when.strftime("%H:%M")
    )


def plan_label(plan: PricePlan | None, translate: Callable[[str], str]) -> str | None:
    """The label of a plan priced at a billed rate (``None``: it is not)."""
    whole = None if plan is None else plan.whole
    if whole is None or whole.per_gpu.basis != BASIS_BILLED or not whole.row.as_of:
        return None
    try:
        read_at = datetime.fromisoformat(whole.row.as_of)
    except ValueError:
        return None
    return rate_label(whole.row.provider, read_at, translate)


def parse_usd_per_hour(value: object, what: str) -> Decimal:
    """A positive, finite number of dollars per hour, to the micro-dollar (else
    RateRefused). Strings and booleans are refused: the APIs answer numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RateRefused(f"{what} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise RateRefused(f"{what} is not a finite number")
    try:
        price = Decimal(str(value)).quantize(MICRO)
    except InvalidOperation:
        raise RateRefused(f"{what} is not a usable number") from None
    if price <= 0:
        raise RateRefused(f"{what} is {price}: a billed rate is never zero or less")
    return price


def answer_object(answer: str, what: str) -> dict[str, object]:
    """The JSON object an API answered (else RateRefused)."""
    try:
        doc = json.loads(answer)
    except ValueError:
        raise RateRefused(f"{what} is not JSON") from None
    if not isinstance(doc, dict):
        raise RateRefused(f"{what} is not a JSON object")
    return doc


def rented_gpus(
    name: object, count: object, what: str, memory_bytes: int | None = None
) -> tuple[str, int]:
    """The catalog model and count of the GPUs an answer names (else RateRefused)."""
    if not isinstance(name, str) or not name.isprintable() or len(name) > 100:
        raise RateRefused(f"{what} names no GPU")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 64:
        raise RateRefused(f"{what} has no GPU count")
    model = model_for(name, memory_bytes)
    if model is None:
        raise RateRefused(f"{what}: the catalog does not know the GPU {name!r}")
    return model, count


def catalog_range(catalog: Catalog, model: str) -> tuple[Decimal, Decimal] | None:
    """The cheapest and dearest US-dollar prices per GPU-hour of ``model`` in the catalog."""
    prices = [
        r.per_gpu_hour
        for r in catalog.rows
        if r.model == model and r.currency == "USD" and r.per_gpu_hour > 0
    ]
    return (min(prices), max(prices)) if prices else None


def check_plausible(rate: BilledRate, catalog: Catalog) -> None:
    """RateRefused where the rate is far from the catalog's prices of its GPUs."""
    if rate.gpus < 1:
        raise RateRefused(f"{rate.source()}: the rental has no GPU")
    known = catalog_range(catalog, rate.gpu_model)
    if known is None:
        raise RateRefused(
            f"{rate.source()}: the catalog has no price of {rate.gpu_model or 'its GPU'} "
            "to check it against"
        )
    cheapest, dearest = known
    floor = Fraction(cheapest) * rate.gpus * FLOOR_FRACTION
    ceiling = Fraction(dearest) * rate.gpus * CEILING_FACTOR
    if Fraction(rate.usd_per_hour) < floor:
        raise RateRefused(
            f"{rate.source()}: under {FLOOR_FRACTION} of the cheapest catalog price of "
            f"{rate.gpus} {rate.gpu_model} ({cheapest} USD/h each): refused"
        )
    if Fraction(rate.usd_per_hour) > ceiling:
        raise RateRefused(
            f"{rate.source()}: over {CEILING_FACTOR} times the dearest catalog price of "
            f"{rate.gpus} {rate.gpu_model} ({dearest} USD/h each): refused"
        )


def billed_plan(plan: PricePlan, rate: BilledRate, market: str) -> PricePlan:
    """``plan`` with the rental priced whole at the billed rate (its note, which said why it
    was not priced whole, goes)."""
    if plan.whole is not None:
        row = replace(
            plan.whole.row,
            per_hour=rate.usd_per_hour,
            currency="USD",
            as_of=rate.read_at.isoformat(timespec="minutes"),
            source=rate.source(),
            confidence="listed",
        )
    else:
        row = InstanceRow(
            provider=rate.provider,
            instance=rate.detail or rate.provider,
            gpu_model=rate.gpu_model,
            gpus=rate.gpus,
            per_hour=rate.usd_per_hour,
            market=market or "on-demand",
            region="",
            source=rate.source(),
            as_of=rate.read_at.isoformat(timespec="minutes"),
            confidence="listed",
        )
    whole = whole_instance(row)
    per_gpu = replace(whole.per_gpu, basis=BASIS_BILLED, source=rate.source())
    return replace(plan, whole=replace(whole, per_gpu=per_gpu), note_msgid="", note_values=())
