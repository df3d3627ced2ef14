"""Lambda's Cloud API: the instance's type read by its id, and its terminate.

Lambda documents no signal inside an instance that a server could read (no metadata
service, no variable): the admin names the provider and the instance's id
(``c.GpuCost.machine_provider = "lambda"``, ``c.GpuCost.machine_instance_id``) and gives an
API key (``c.GpuCost.lambda_api_key`` or ``LAMBDA_API_KEY``). As Lambda's Cloud API
documents it (cloud.lambda.ai/api/v1, "Cloud API" in docs.lambda.ai):

* ``GET /instances/{id}``: ``{"data": {"id", "status", "region": {"name"},
  "instance_type": {"name", "price_cents_per_hour", "gpu_description", "specs": {"gpus"},
  ...}, ...}}``: the type, and the rate the instance is billed (:func:`read_rate`);
* ``POST /instance-operations/terminate`` ``{"instance_ids": [id]}``:
  ``{"data": {"terminated_instances": [...]}}``. Lambda's on-demand instances cannot be
  stopped, only terminated: billing ends, and the instance's local disk is erased
  (persistent filesystems stay, and bill);
* errors: ``{"error": {"code", "message", "suggestion"}}`` with ``global/invalid-api-key``
  (401), ``global/account-inactive`` (403), ``global/object-does-not-exist`` (404).

The key travels as ``Authorization: Bearer <key>`` (blanked out of every message).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from datetime import UTC, datetime
from urllib.parse import quote

from ..core.billed_rate import BilledRate, RateRefused, answer_object, parse_usd_per_hour
from ..core.gpu_models import model_for
from ..core.i18n import _
from ..core.machine import STILL_LAMBDA, Machine, MetadataError, parse_lambda
from .http import Answer, HttpFailure, redact, request
from .outcome import LAMBDA_API, StopResult, StopSettings, fail

__all__ = ["LAMBDA_API", "parse_rate", "read_machine", "read_rate", "stop"]


def _headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Accept": "application/json"}


#: how long an instance's answer serves both readers: detection reads the type and, a moment
#: later, the billed rate reads the price from the same ``GET /instances/{id}``
SHARED_ANSWER_S = 60.0
#: (url, the key's digest) -> (when, the answer): the last answer of each instance
_answers: dict[tuple[str, str], tuple[float, Answer]] = {}
_answers_lock = threading.Lock()


def _instance(api_url: str, key: str, instance_id: str, timeout_s: float) -> Answer:
    """``GET /instances/{id}``, or its 200 answer of the last ``SHARED_ANSWER_S``."""
    url = f"{api_url.rstrip('/')}/instances/{quote(instance_id, safe='')}"
    # the key itself is never kept: a digest tells two keys apart
    memo = (url, hashlib.sha256(key.encode()).hexdigest())
    with _answers_lock:
        kept = _answers.get(memo)
    if kept is not None and time.monotonic() - kept[0] < SHARED_ANSWER_S:
        return kept[1]
    got = request("GET", url, headers=_headers(key), timeout_s=timeout_s)
    if got.status == 200:
        with _answers_lock:
            _answers[memo] = (time.monotonic(), got)
    return got


def error_of(answer: Answer) -> str:
    """``global/invalid-api-key: API key was invalid...`` from an error answer, or ""."""
    try:
        error = json.loads(answer.body).get("error")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(error, dict):
        return ""
    code, message = error.get("code"), error.get("message")
    parts = [p for p in (code, message) if isinstance(p, str) and p.isprintable()]
    # an answer may quote the key it was sent: blanked out
    return redact(": ".join(parts), answer.secrets)[:300]


def read_machine(
    api_url: str, key: str, instance_id: str, timeout_s: float, shared: bool
) -> Machine:
    """The named instance's type and region (one request)."""
    if not key or not instance_id:
        raise MetadataError("no Lambda API key or instance id is set")
    got = _instance(api_url, key, instance_id, timeout_s)
    if got.status != 200:
        raise MetadataError(
            f"Lambda's Cloud API answered {got.status} for the instance ({error_of(got)})"
        )
    return parse_lambda(got.body, shared=shared)


def parse_rate(answer: str, instance_id: str, now: datetime) -> BilledRate:
    """The billed rate of ``GET /instances/{id}``'s answer (else RateRefused): its type's
    ``price_cents_per_hour``; the GPUs from ``gpu_description`` and ``specs.gpus``."""
    what = "Lambda's instance answer"
    data = answer_object(answer, what).get("data")
    if not isinstance(data, dict) or data.get("id") != instance_id:
        raise RateRefused(f"{what} is not for instance {instance_id}")
    kind = data.get("instance_type")
    if not isinstance(kind, dict):
        raise RateRefused(f"{what} has no instance_type")
    cents = parse_usd_per_hour(kind.get("price_cents_per_hour"), f"{what}'s price_cents_per_hour")
    specs = kind.get("specs")
    gpus = specs.get("gpus") if isinstance(specs, dict) else None
    name = kind.get("gpu_description")
    model = model_for(name) if isinstance(name, str) and len(name) <= 100 else None
    type_name = kind.get("name")
    return BilledRate(
        "lambda",
        cents / 100,
        now,
        model or "",
        gpus if isinstance(gpus, int) and not isinstance(gpus, bool) and 0 < gpus <= 64 else 0,
        instance_id,
        type_name if isinstance(type_name, str) and type_name.isprintable() else "",
    )


def read_rate(api_url: str, key: str, instance_id: str, timeout_s: float) -> BilledRate:
    """Ask Lambda (blocking: call it off the event loop)."""
    if not key or not instance_id:
        raise RateRefused("no Lambda API key or instance id is set")
    try:
        got = _instance(api_url, key, instance_id, timeout_s)
    except HttpFailure as e:
        raise RateRefused(str(e)) from None
    if got.status != 200:
        raise RateRefused(f"Lambda's Cloud API answered {got.status} ({error_of(got)})")
    return parse_rate(got.body, instance_id, datetime.now(UTC))


def stop(machine: Machine, settings: StopSettings, key: str) -> StopResult:
    """Terminate this instance (Lambda cannot stop one)."""
    if not key:
        return fail(
            "lambda",
            _("no Lambda API key: set c.GpuCost.lambda_api_key (or LAMBDA_API_KEY)"),
        )
    if not machine.instance_id:
        return fail(
            "lambda",
            _("the Lambda instance id is not known: set c.GpuCost.machine_instance_id"),
        )
    answer = request(
        "POST",
        f"{settings.lambda_api_url.rstrip('/')}/instance-operations/terminate",
        headers={**_headers(key), "Content-Type": "application/json"},
        body=json.dumps({"instance_ids": [machine.instance_id]}).encode(),
        timeout_s=settings.timeout_s,
    )
    why = error_of(answer) or answer.snippet()
    if answer.status == 401:
        return fail(
            "lambda",
            _("Lambda did not accept the API key ({status} {why})").format(
                status=answer.status, why=why
            ),
        )
    if answer.status == 403:
        return fail(
            "lambda",
            _(
                "Lambda refused to terminate the instance ({status} {why}): the API key "
                "must be allowed to terminate instances"
            ).format(status=answer.status, why=why),
        )
    terminated: list[object] = []
    if answer.status == 200:
        try:
            found = json.loads(answer.body)["data"]["terminated_instances"]
            terminated = found if isinstance(found, list) else []
        except (ValueError, KeyError, TypeError):
            terminated = []
    ids = [t.get("id") for t in terminated if isinstance(t, dict)]
    if answer.status != 200 or machine.instance_id not in ids:
        return fail(
            "lambda",
            _("Lambda answered {status}: {why}").format(status=answer.status, why=why),
        )
    return StopResult(
        True,
        "lambda",
        _("Lambda is terminating instance {instance}").format(instance=machine.instance_id),
        STILL_LAMBDA,
    )
