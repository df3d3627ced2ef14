"""Vast.ai's billed rate of this instance, read from its API.

What ``vastai show instance $CONTAINER_ID`` sends (vast-ai/vast-cli): ``GET
/instances/{id}/?owner=me`` with the instance's own ``CONTAINER_API_KEY`` (docs.vast.ai,
"Docker Execution Environment") as ``Authorization: Bearer``; it answers ``{"instances":
{...}}`` (``null`` for an id the key does not own), whose ``dph_total`` is the dollars per
hour the instance is billed, all in (GPUs, storage, bandwidth at their hourly rates),
``gpu_name`` ("RTX 4090"), ``num_gpus`` and ``gpu_ram`` (MB per GPU).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ..core.billed_rate import BilledRate, RateRefused, parse_usd_per_hour
from ..core.gpu_models import model_for
from .http import HttpFailure, request

VAST_API = "https://console.vast.ai/api/v0"
#: bytes in Vast's ``gpu_ram`` unit
MB = 1024 * 1024


def parse_vast(answer: str, instance_id: str, now: datetime) -> BilledRate:
    """The rate of ``show instance``'s answer (else RateRefused)."""
    what = "Vast.ai's instance answer"
    try:
        doc: Any = json.loads(answer)
    except ValueError:
        raise RateRefused(f"{what} is not JSON") from None
    row = doc.get("instances") if isinstance(doc, dict) else None
    if not isinstance(row, dict):
        raise RateRefused(f"{what} has no instance")
    if str(row.get("id")) != instance_id:
        raise RateRefused(f"{what} is for another instance than {instance_id}")
    price = parse_usd_per_hour(row.get("dph_total"), f"{what}'s dph_total")
    name, gpus, ram = row.get("gpu_name"), row.get("num_gpus"), row.get("gpu_ram")
    if not isinstance(name, str) or not name.isprintable() or len(name) > 100:
        raise RateRefused(f"{what} names no GPU")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= 64:
        raise RateRefused(f"{what} has no GPU count")
    memory = int(ram * MB) if isinstance(ram, int | float) and 0 < ram < 1e7 else None
    model = model_for(name, memory)
    if model is None:
        raise RateRefused(f"{what}: the catalog does not know the GPU {name!r}")
    return BilledRate("vast", price, now, model, gpus, instance_id, f"{gpus}× {name}")


def read_vast_rate(api_url: str, key: str, instance_id: str, timeout_s: float) -> BilledRate:
    """Ask Vast.ai (blocking: call it off the event loop)."""
    if not key:
        raise RateRefused("CONTAINER_API_KEY is not set (Vast.ai puts it in every instance)")
    if not (instance_id.isascii() and instance_id.isdigit()):
        raise RateRefused("the Vast.ai instance id (CONTAINER_ID) is not known")
    url = f"{api_url.rstrip('/')}/instances/{instance_id}/?owner=me"
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
    try:
        answer = request("GET", url, headers=headers, timeout_s=timeout_s)
    except HttpFailure as e:
        raise RateRefused(str(e)) from None
    if answer.status != 200:
        raise RateRefused(f"Vast.ai answered {answer.status}: {answer.snippet()}")
    return parse_vast(answer.body, instance_id, datetime.now(UTC))
