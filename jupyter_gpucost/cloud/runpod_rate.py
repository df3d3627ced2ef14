"""RunPod's billed rate of this pod, read from its GraphQL API.

What runpod-python's ``get_pod`` sends: ``POST https://api.runpod.io/graphql`` with
``{"query": "query pod { pod(input: {podId: ...}) { ... } }"}`` and the pod's
``RUNPOD_API_KEY`` (RunPod puts it in every pod) as ``Authorization: Bearer``. The answer
is ``{"data": {"pod": {"id", "costPerHr", "adjustedCostPerHr", "gpuCount", "machine":
{"gpuDisplayName"}}}}`` (RunPod's GraphQL spec: ``costPerHr: Float!``,
``adjustedCostPerHr: Float!``, the rate after the account's discounts, used where given),
or ``{"errors": [{"message"}]}``; ``pod`` is ``null`` for an id the key cannot see.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ..core.billed_rate import (
    BilledRate,
    RateRefused,
    answer_object,
    parse_usd_per_hour,
    rented_gpus,
)
from .http import HttpFailure, request

RUNPOD_GRAPHQL = "https://api.runpod.io/graphql"
QUERY = (
    "query pod($input: PodFilter) { pod(input: $input) { id costPerHr adjustedCostPerHr "
    "gpuCount machine { gpuDisplayName } } }"
)


def parse_runpod(answer: str, pod_id: str, now: datetime) -> BilledRate:
    """The rate of the ``pod`` query's answer (else RateRefused)."""
    what = "RunPod's pod answer"
    data = answer_object(answer, what).get("data")
    pod = data.get("pod") if isinstance(data, dict) else None
    if not isinstance(pod, dict):
        raise RateRefused(f"{what} has no pod")
    if pod.get("id") != pod_id:
        raise RateRefused(f"{what} is for another pod than {pod_id}")
    adjusted = pod.get("adjustedCostPerHr")
    field = "adjustedCostPerHr" if adjusted is not None else "costPerHr"
    price = parse_usd_per_hour(pod.get(field), f"{what}'s {field}")
    machine = pod.get("machine")
    name = machine.get("gpuDisplayName") if isinstance(machine, dict) else None
    model, gpus = rented_gpus(name, pod.get("gpuCount"), what)
    return BilledRate("runpod", price, now, model, gpus, pod_id, f"{gpus}× {name}")


def read_runpod_rate(api_url: str, key: str, pod_id: str, timeout_s: float) -> BilledRate:
    """Ask RunPod (blocking: call it off the event loop)."""
    if not key:
        raise RateRefused("RUNPOD_API_KEY is not set (RunPod puts it in every pod)")
    if not pod_id:
        raise RateRefused("the RunPod pod id (RUNPOD_POD_ID) is not known")
    body = json.dumps({"query": QUERY, "variables": {"input": {"podId": pod_id}}}).encode()
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json",
    }
    try:
        answer = request("POST", api_url, headers=headers, body=body, timeout_s=timeout_s)
    except HttpFailure as e:
        raise RateRefused(str(e)) from None
    if answer.status != 200:
        raise RateRefused(f"RunPod answered {answer.status}: {answer.snippet()}")
    return parse_runpod(answer.body, pod_id, datetime.now(UTC))
