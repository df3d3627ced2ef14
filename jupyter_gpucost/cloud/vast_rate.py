"""Vast.ai's billed rate of this instance, read from its API.

What ``vastai show instance $CONTAINER_ID`` sends (vast-ai/vast-cli): ``GET
/instances/{id}/?owner=me`` with the instance's own ``CONTAINER_API_KEY`` (docs.vast.ai,
"Docker Execution Environment") as ``Authorization: Bearer``; it answers ``{"instances":
{...}}`` (``null`` for an id the key does not own), whose ``dph_total`` is the dollars per
hour the instance is billed, all in (GPUs, storage, bandwidth at their hourly rates),
``gpu_name`` ("RTX 4090"), ``num_gpus`` and ``gpu_ram`` (MB per GPU).
"""

from __future__ import annotations

from datetime import UTC, datetime

from ..core.billed_rate import (
    BilledRate,
    RateRefused,
    answer_object,
    parse_usd_per_hour,
    rented_gpus,
)
from .http import HttpFailure, request

VAST_API = "https://console.vast.ai/api/v0"
#: bytes in Vast's ``gpu_ram`` unit
MB = 1024 * 1024


def parse_vast(answer: str, instance_id: str, now: datetime) -> BilledRate:
    """The rate of ``show instance``'s answer (else RateRefused)."""
    what = "Vast.ai's instance answer"
    row = answer_object(answer, what).get("instances")
    if not isinstance(row, dict):
        raise RateRefused(f"{what} has no instance")
    if str(row.get("id")) != instance_id:
        raise RateRefused(f"{what} is for another instance than {instance_id}")
    price = parse_usd_per_hour(row.get("dph_total"), f"{what}'s dph_total")
    name, ram = row.get("gpu_name"), row.get("gpu_ram")
    memory = int(ram * MB) if isinstance(ram, int | float) and 0 < ram < 1e7 else None
    model, gpus = rented_gpus(name, row.get("num_gpus"), what, memory)
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
