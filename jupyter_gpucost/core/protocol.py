"""The kernel ↔ server contract: what a server hands to the kernels it starts.

Both processes agree on this and on nothing else: the server writes it
(:mod:`jupyter_gpucost.server.kernel_auth`, ``CostService.publish_prices``), the kernel reads
it (:mod:`jupyter_gpucost.kernel.link`). Pure: no I/O, no tornado, no IPython.

- ``JUPYTER_GPUCOST_URL``: the server's loopback URL with its base URL (absent on a Unix
  socket);
- ``JUPYTER_GPUCOST_TOKEN``: a token of the kernels' own, sent as ``Authorization: token
  <token>`` to the few routes a kernel may call (:data:`STATUS_PATH`, :data:`CELLS_PATH`,
  :data:`BUDGET_PATH`, :data:`GPU_PROBES_PATH`, :data:`PRICES_PATH`);
- ``JUPYTER_GPUCOST_PRICES``: the prices in force when the kernel started, as JSON
  (:func:`encode_prices`, :func:`decode_prices`), so that ``%%gpucost`` prices cells as the
  server does; a running kernel asks :data:`PRICES_PATH` (the same document) for the prices
  in force now, which change when the server reads a quoted price again (a rental's billed
  rate, a spot price);
- ``JUPYTER_GPUCOST_LANGUAGE``: JupyterLab's language (``zh_CN``), which the kernel's own
  output is written in (English when absent or not shipped).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypedDict

from .currency import DEFAULT_CURRENCY, is_currency_code

ENV_URL = "JUPYTER_GPUCOST_URL"
ENV_TOKEN = "JUPYTER_GPUCOST_TOKEN"
ENV_PRICES = "JUPYTER_GPUCOST_PRICES"
ENV_LANGUAGE = "JUPYTER_GPUCOST_LANGUAGE"
#: every name the server puts in its kernels' environment
KERNEL_ENV = (ENV_URL, ENV_TOKEN, ENV_PRICES, ENV_LANGUAGE)

#: the extension's REST API, relative to the server's base URL
API_PATH = "gpucost/api"
#: the routes a kernel calls with its token
STATUS_PATH = f"{API_PATH}/status"
CELLS_PATH = f"{API_PATH}/cells"
BUDGET_PATH = f"{API_PATH}/budget"
#: a kernel identifies its own GPU process (in a container), :mod:`..server.gpu_use.gpu_claims`
GPU_PROBES_PATH = f"{API_PATH}/kernels/gpu-probes"
#: the prices in force now (the document of ``JUPYTER_GPUCOST_PRICES``)
PRICES_PATH = f"{API_PATH}/kernels/prices"


def gpu_probe_signature(key: bytes, kernel_id: str, gpu_uuid: str) -> str:
    """What a kernel sends to start identifying its GPU process: HMAC-SHA256, with its own
    connection key (which only it and its server hold), of its id and the GPU's UUID."""
    message = f"jupyter-gpucost gpu probe\n{kernel_id}\n{gpu_uuid}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


#: the scheme of the ``Authorization`` header a kernel sends its token with
TOKEN_SCHEME = "token"
#: where the prices come from when the payload does not say
DEFAULT_PRICES_SOURCE = "the server's prices"


@dataclass(frozen=True)
class PricedGpu:
    """One of the server's GPUs as kernels price it."""

    uuid: str
    name: str
    #: the price per hour in the session's currency; None when the catalog has no price
    #: for it (never a silent $0)
    per_hour: Decimal | None
    #: why the price is an upper bound, a message of the catalog (``""``: it is not one;
    #: :attr:`jupyter_gpucost.core.catalog.Price.reason_msgid`), translated by the kernel
    bound_msgid: str = ""
    #: the values the message fills in
    bound_values: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PublishedPrices:
    """The prices in force on the server (after the admin's provider, market, instance and
    overrides), as its kernels receive them."""

    gpus: tuple[PricedGpu, ...]
    base_per_hour: Decimal
    currency_symbol: str
    #: where the prices come from, for the report
    source: str
    #: the server's GPUs are simulated (a replayed trace), not read from a driver
    simulated: bool = False
    #: what simulates them (the trace's description), when simulated
    simulated_by: str = ""
    #: the currency of every price (ISO 4217): a kernel's records are in it
    currency: str = DEFAULT_CURRENCY


def encode_prices(prices: PublishedPrices) -> str:
    """The value of ``JUPYTER_GPUCOST_PRICES`` (prices as exact decimal strings)."""
    return json.dumps(prices_document(prices))


def prices_document(prices: PublishedPrices) -> dict[str, object]:
    """The prices as a JSON object: the environment's value, and :data:`PRICES_PATH`'s
    answer."""
    return {
        "simulated": prices.simulated,
        "simulated_by": prices.simulated_by,
        "gpus": [
            {
                "uuid": g.uuid,
                "name": g.name,
                "usd_per_hour": None if g.per_hour is None else str(g.per_hour),
                "upper_bound": None
                if not g.bound_msgid
                else {"msgid": g.bound_msgid, "values": dict(g.bound_values)},
            }
            for g in prices.gpus
        ],
        "base_usd_per_hour": str(prices.base_per_hour),
        "currency_symbol": prices.currency_symbol,
        "currency": prices.currency,
        "source": prices.source,
    }


class _Bound(TypedDict, total=False):
    bound_msgid: str
    bound_values: tuple[tuple[str, str], ...]


def _bound(raw: object) -> _Bound:
    """The upper bound's message and values of one GPU (none: not an upper bound)."""
    if not isinstance(raw, dict):
        return {}
    values = raw.get("values")
    pairs = (
        tuple(sorted((str(k), str(v)) for k, v in values.items()))
        if isinstance(values, dict)
        else ()
    )
    return {"bound_msgid": str(raw.get("msgid") or ""), "bound_values": pairs}


def _currency(value: object) -> str:
    """The payload's currency (a server before it was sent: US dollars); ``ValueError``
    when it is not an ISO 4217 code."""
    if not isinstance(value, str) or not is_currency_code(value):
        raise ValueError(value)
    return value


def decode_prices(raw: str) -> PublishedPrices | None:
    """``JUPYTER_GPUCOST_PRICES`` read back, or None when it is not a payload of this shape
    (the kernel then prices from the shipped catalog)."""
    try:
        return read_prices_document(json.loads(raw))
    except ValueError:
        return None


def read_prices_document(data: object) -> PublishedPrices | None:
    """:func:`prices_document` read back, or None when it is not one of this shape."""
    if not isinstance(data, dict):
        return None
    try:
        gpus = tuple(
            PricedGpu(
                uuid=str(g["uuid"]),
                name=str(g["name"]),
                per_hour=None if g["usd_per_hour"] is None else Decimal(g["usd_per_hour"]),
                **_bound(g.get("upper_bound")),
            )
            for g in data.get("gpus", [])
        )
        return PublishedPrices(
            gpus=gpus,
            base_per_hour=Decimal(data.get("base_usd_per_hour", "0")),
            currency_symbol=str(data.get("currency_symbol", "$")),
            source=str(data.get("source", DEFAULT_PRICES_SOURCE)),
            simulated=data.get("simulated") is True,
            simulated_by=str(data.get("simulated_by") or ""),
            currency=_currency(data.get("currency", DEFAULT_CURRENCY)),
        )
    except (ValueError, KeyError, TypeError, ArithmeticError, AttributeError):
        return None


def binding_standing(budget: dict[str, Any] | None) -> dict[str, Any] | None:
    """The budget document's binding budget (``binding`` names its kind): ``hard`` or
    ``soft``, or, for ``hub``, the hub's budget with the least money left."""
    if not budget:
        return None
    kind = budget.get("binding")
    if kind in ("hard", "soft"):
        standing = budget.get(kind)
        return standing if isinstance(standing, dict) else None
    if kind == "hub":
        hub = budget.get("hub") or {}
        standings = [b for b in hub.get("budgets") or [] if isinstance(b, dict)]
        known = [b for b in standings if b.get("remaining_usd") is not None]
        if known:
            return min(known, key=lambda b: float(b["remaining_usd"]))
        return standings[0] if standings else None
    return None
