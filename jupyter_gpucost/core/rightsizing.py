"""Right-sizing: the cheapest GPU of the catalog that would have held this session.

From the session's peak GPU memory (the most any one GPU held) and the GPUs it had, the
cheapest model of the same provider and market whose memory is at least that peak, and
what the session's billed time would have cost on as many of them. A model whose memory
is below the observed peak is never recommended. Memory sizes are the vendors' board
specifications (decimal GB as sold; compared with the peak in bytes).

Memory is not the only limit: a smaller GPU computes more slowly, so a session that kept
its GPUs busy would run longer on it, and its cost there cannot be read off the price.
Advice is therefore only given when the GPUs were busy at most ``MAX_BUSY_SHARE`` of the
observed time (the session was not compute-bound), and only once the session has held its
GPUs for ``MIN_OBSERVED_S`` (a session 17 s old has not shown what it does yet: the run
that fills the GPU may start a minute later); otherwise :func:`why_not` says why there is
none.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from .billing import cost_micro
from .catalog import Catalog
from .currency import in_language, symbol
from .i18n import _, current_language
from .meter import MeterSnapshot
from .money import exact, round_micro
from .regions import region_exact

GB = 10**9
#: above this share of busy GPU time, no cheaper GPU is recommended
MAX_BUSY_SHARE = 0.3
#: no advice before the session has held its GPUs this long (seconds)
MIN_OBSERVED_S = 300

#: board memory of each catalog model, in bytes (vendor specifications)
MODEL_MEMORY_BYTES: dict[str, int] = {
    "T4": 16 * GB,
    "L4": 24 * GB,
    "A10": 24 * GB,
    "A10G": 24 * GB,
    "L40S": 48 * GB,
    "V100": 16 * GB,
    "A100-40GB": 40 * GB,
    "A100-80GB": 80 * GB,
    "H100-80GB": 80 * GB,
    "H100-NVL": 94 * GB,
    "H200": 141 * GB,
    "B200": 180 * GB,
}


@dataclass(frozen=True)
class Advice:
    model: str
    per_gpu_hour: Decimal
    gpus: int
    cost_micro: int
    instead_of_micro: int
    peak_memory_bytes: int
    reason: str


def peak_memory_bytes(snapshot: MeterSnapshot, previous: int | None) -> int | None:
    """The largest memory any GPU held, folding in the last reading."""
    values = [
        g.reading.memory_used_bytes
        for g in snapshot.gpus
        if g.reading is not None and g.reading.memory_used_bytes is not None
    ]
    if previous is not None:
        values.append(previous)
    return max(values) if values else None


def busy_share(snapshot: MeterSnapshot) -> float | None:
    used = sum(g.used_us for g in snapshot.gpus)
    observed = used + sum(g.idle_us for g in snapshot.gpus)
    return used / observed if observed else None


def why_not(snapshot: MeterSnapshot) -> str | None:
    """Why no advice is given although the GPUs are priced, or ``None``."""
    held_s = snapshot.elapsed_us / 1_000_000
    if snapshot.gpus and held_s < MIN_OBSERVED_S:
        return _(
            "Too early to tell: advice is given once the session has held its GPUs for "
            "{minutes} minutes ({held_s} s so far)."
        ).format(minutes=MIN_OBSERVED_S // 60, held_s=int(held_s))
    share = busy_share(snapshot)
    if share is not None and share > MAX_BUSY_SHARE:
        return _(
            "The GPUs were busy {share} of the time: a smaller GPU would compute more "
            "slowly, so what the session would have cost on it cannot be told from its price."
        ).format(share=f"{share:.0%}")
    return None


def advise(
    snapshot: MeterSnapshot,
    catalog: Catalog,
    *,
    provider: str,
    market: str,
    peak_bytes: int | None,
    region: str = "",
) -> Advice | None:
    """The cheapest model that fits, if it is cheaper and the session was not busy, at the
    prices of the machine's ``region`` (rows of other regions are not its prices)."""
    # a GPU priced at an upper bound has no real price to compare: no advice from it
    priced = [g for g in snapshot.gpus if g.price is not None and not g.price.upper_bound]
    if not priced or peak_bytes is None or why_not(snapshot) is not None:
        return None
    count = len(priced)
    current = sum(g.cost_micro for g in priced)
    candidates: dict[str, Decimal] = {}
    for row in catalog.rows:
        if row.provider != provider or row.market != market:
            continue
        if not region_exact(row.region, region):
            continue
        memory = MODEL_MEMORY_BYTES.get(row.model)
        if memory is None or memory < peak_bytes:
            continue
        price = candidates.get(row.model)
        if price is None or row.per_gpu_hour < price:
            candidates[row.model] = row.per_gpu_hour
    if not candidates:
        return None
    model, price = min(candidates.items(), key=lambda item: (item[1], item[0]))
    cost = round_micro(cost_micro(price, snapshot.billed_us) * count)
    if cost >= current or model in {g.model for g in priced}:
        return None
    return Advice(
        model=model,
        per_gpu_hour=price,
        gpus=count,
        cost_micro=cost,
        instead_of_micro=current,
        peak_memory_bytes=peak_bytes,
        reason=_(
            "GPUs busy {share} of the time; peak memory {memory} GiB fits in a {model} "
            "({model_gb} GB); {count}× {model} at {rate} for the same billed time"
        ).format(
            share=f"{busy_share(snapshot) or 0:.0%}",
            memory=f"{peak_bytes / 2**30:.1f}",
            model=model,
            model_gb=MODEL_MEMORY_BYTES[model] // GB,
            count=count,
            rate=_("{price}/h").format(price=exact(price, _reader_symbol(catalog, provider))),
        ),
    )


def _reader_symbol(catalog: Catalog, provider: str) -> str:
    """The symbol of the provider's currency as the reader's language writes it."""
    return in_language(symbol(catalog.currency_of(provider)), current_language())
