"""Alibaba Cloud ECS: the instance read from its metadata service, stopped by ``StopInstance``.

As Alibaba Cloud documents them:

* the metadata service answers at ``http://100.100.100.200``; its hardened mode (like
  IMDSv2) hands out a token on ``PUT /latest/api/token`` with
  ``X-aliyun-ecs-metadata-token-ttl-seconds`` and wants it back in
  ``X-aliyun-ecs-metadata-token`` (ECS help, "Obtain instance metadata"); the normal mode
  needs no token, so a refused token is not an error;
* ``/latest/dynamic/instance-identity/document``: a JSON document with ``instance-id``,
  ``region-id``, ``zone-id`` and ``instance-type`` (ECS help, "Use instance identities");
* the instance's RAM role: its name at ``/latest/meta-data/ram/security-credentials/``,
  its temporary credentials (``AccessKeyId``, ``AccessKeySecret``, ``SecurityToken``,
  ``Expiration``, ``Code: "Success"``) at ``.../security-credentials/<role>`` (ECS help,
  "Instance RAM roles");
* ``StopInstance`` (ECS API 2014-05-26): an RPC call signed with HMAC-SHA1
  (``SignatureVersion=1.0``: the sorted, percent-encoded parameters, ``POST&%2F&...``, keyed
  with ``AccessKeySecret + "&"``; help.aliyun.com "Signature mechanism" of RPC APIs), the
  STS ``SecurityToken`` as a parameter; ``StoppedMode``: ``StopCharging`` (economical mode:
  vCPUs, memory and GPUs stop billing where the instance qualifies) or ``KeepCharging``.
  Errors answer JSON ``{"Code", "Message", "RequestId"}``: ``Forbidden.RAM`` (403) when
  the role may not, ``InvalidAccessKeyId.NotFound``, ``SignatureDoesNotMatch``,
  ``InvalidSecurityToken.Expired``, ``IncorrectInstanceStatus``.

The parameters travel in the POST body, never in the URL: no credential is in a URL a
failure could quote.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import quote

from ..core.i18n import _
from ..core.machine import (
    STILL_ALIBABA_KEEP_CHARGING,
    STILL_ALIBABA_STOP_CHARGING,
    Machine,
    MetadataError,
    parse_alibaba,
)
from .http import Answer, request
from .outcome import ALIBABA_ECS_API, StopResult, StopSettings, fail

#: the documented metadata address
ALIBABA_METADATA = "http://100.100.100.200"
__all__ = ["ALIBABA_ECS_API", "ALIBABA_METADATA", "read_machine", "stop"]
ECS_API_VERSION = "2014-05-26"
TOKEN_HEADER = "X-aliyun-ecs-metadata-token"
TOKEN_TTL_HEADER = "X-aliyun-ecs-metadata-token-ttl-seconds"
#: seconds a metadata token lives (the least the calls need)
TOKEN_TTL_S = 60
STOPPED_MODES = ("StopCharging", "KeepCharging")
#: the codes that mean "this role may not" (a refusal names what to grant)
REFUSED_CODES = frozenset({"Forbidden.RAM", "Forbidden", "NoPermission", "Forbidden.NotAuthorized"})
#: the codes that mean "these credentials are not valid"
BAD_KEY_CODES = frozenset(
    {
        "InvalidAccessKeyId.NotFound",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidSecurityToken.Expired",
        "InvalidSecurityToken.Malformed",
        "InvalidSecurityToken.MismatchWithAccessKey",
    }
)


def _token_headers(base: str, timeout_s: float) -> dict[str, str]:
    """The hardened mode's token header, or none where the service gives no token."""
    got = request(
        "PUT",
        f"{base}/latest/api/token",
        headers={TOKEN_TTL_HEADER: str(TOKEN_TTL_S)},
        timeout_s=timeout_s,
    )
    token = got.body.strip() if got.status == 200 else ""
    return {TOKEN_HEADER: token} if token and token.isprintable() and len(token) < 4096 else {}


def read_machine(metadata_url: str, timeout_s: float, shared: bool) -> Machine:
    """The instance, from its identity document (two requests at most)."""
    base = metadata_url.rstrip("/")
    headers = _token_headers(base, timeout_s)
    doc = request(
        "GET",
        f"{base}/latest/dynamic/instance-identity/document",
        headers=headers,
        timeout_s=timeout_s,
    )
    if doc.status != 200:
        raise MetadataError(
            f"the ECS metadata service answered {doc.status} for the identity document"
        )
    return parse_alibaba(doc.body, shared=shared)


def percent(text: str) -> str:
    """RPC's percent-encoding: RFC 3986 unreserved characters kept, UTF-8, ``%20`` for a space."""
    return quote(text, safe="-_.~")


def signature(params: Mapping[str, str], secret: str, method: str = "POST") -> str:
    """``Base64(HMAC-SHA1(secret + "&", method & %2F & percent(sorted query)))``."""
    query = "&".join(f"{percent(k)}={percent(v)}" for k, v in sorted(params.items()))
    to_sign = f"{method}&{percent('/')}&{percent(query)}"
    digest = hmac.new(f"{secret}&".encode(), to_sign.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


class Credentials:
    """The role's temporary credentials (never shown: :attr:`secrets` are blanked out)."""

    def __init__(self, key_id: str, secret: str, token: str) -> None:
        self.key_id = key_id
        self.secret = secret
        self.token = token

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.key_id, self.secret, self.token) if s)


class NoRole(Exception):
    """The instance has no RAM role, or its credentials could not be read (the reason)."""


def role_credentials(metadata_url: str, timeout_s: float) -> Credentials:
    base = metadata_url.rstrip("/")
    headers = _token_headers(base, timeout_s)
    listing = request(
        "GET",
        f"{base}/latest/meta-data/ram/security-credentials/",
        headers=headers,
        timeout_s=timeout_s,
    )
    role = listing.body.strip().splitlines()[0].strip() if listing.status == 200 else ""
    if not role or not role.isprintable() or "/" in role or len(role) > 256:
        raise NoRole(f"no RAM role is attached ({listing.status})")
    got = request(
        "GET",
        f"{base}/latest/meta-data/ram/security-credentials/{quote(role)}",
        headers=headers,
        timeout_s=timeout_s,
    )
    try:
        doc = json.loads(got.body) if got.status == 200 else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("Code") != "Success":
        raise NoRole(f"the role {role}'s credentials were not given ({got.status})")
    fields = [doc.get(k) for k in ("AccessKeyId", "AccessKeySecret", "SecurityToken")]
    if not all(isinstance(f, str) and f for f in fields):
        raise NoRole(f"the role {role}'s credentials are incomplete")
    key_id, secret, token = (str(f) for f in fields)
    return Credentials(key_id, secret, token)


def stop_request(
    api_url: str,
    instance_id: str,
    region: str,
    credentials: Credentials,
    stopped_mode: str,
    timeout_s: float,
    *,
    now: datetime | None = None,
    nonce: str | None = None,
) -> Answer:
    """``StopInstance`` for this instance, signed with the role's credentials, sent to the
    ECS endpoint of its region (StopInstance takes no RegionId: the endpoint is the
    region's)."""
    params = {
        "Action": "StopInstance",
        "InstanceId": instance_id,
        "StoppedMode": stopped_mode,
        "Format": "JSON",
        "Version": ECS_API_VERSION,
        "AccessKeyId": credentials.key_id,
        "SecurityToken": credentials.token,
        "SignatureMethod": "HMAC-SHA1",
        "SignatureVersion": "1.0",
        "SignatureNonce": nonce or uuid.uuid4().hex,
        "Timestamp": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    params["Signature"] = signature(params, credentials.secret)
    body = "&".join(f"{percent(k)}={percent(v)}" for k, v in params.items()).encode()
    url = api_url.replace("{region}", quote(region or "cn-hangzhou", safe="")).rstrip("/") + "/"
    return request(
        "POST",
        url,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        body=body,
        timeout_s=timeout_s,
        secrets=credentials.secrets,
    )


def error_code(answer: Answer) -> tuple[str, str]:
    """The ``Code`` and ``Message`` of an ECS error answer ("" where it has none)."""
    try:
        doc = json.loads(answer.body)
    except ValueError:
        return "", ""
    if not isinstance(doc, dict):
        return "", ""
    code, message = doc.get("Code"), doc.get("Message")
    return (
        code if isinstance(code, str) and code.isprintable() else "",
        # a SignatureDoesNotMatch quotes the string signed, the token in it: blanked whole
        " ".join(answer.shown(message).split())[:300] if isinstance(message, str) else "",
    )


def stop(
    machine: Machine, settings: StopSettings, metadata_url: str, secrets: list[str]
) -> StopResult:
    """``StopInstance`` on this instance with its role's credentials (added to ``secrets``)."""
    if not machine.instance_id:
        return fail(
            "alibaba", _("the ECS instance id is not known (its metadata service did not answer)")
        )
    grant = _(
        "attach a RAM role to the instance allowed ecs:StopInstance on "
        "acs:ecs:{region}:*:instance/{instance}"
    ).format(region=machine.region or "*", instance=machine.instance_id)
    try:
        credentials = role_credentials(metadata_url, settings.timeout_s)
    except NoRole as e:
        return fail(
            "alibaba", _("no RAM role credentials ({why}): {grant}").format(why=str(e), grant=grant)
        )
    secrets.extend(credentials.secrets)
    mode = settings.alibaba_stopped_mode
    answer = stop_request(
        settings.alibaba_ecs_api_url,
        machine.instance_id,
        machine.region,
        credentials,
        mode,
        settings.timeout_s,
    )
    code, text = error_code(answer)
    if answer.status == 200 and not code:
        still = (
            STILL_ALIBABA_KEEP_CHARGING if mode == "KeepCharging" else STILL_ALIBABA_STOP_CHARGING
        )
        return StopResult(
            True,
            "alibaba",
            _("Alibaba Cloud is stopping {instance} ({mode})").format(
                instance=machine.instance_id, mode=mode
            ),
            still,
        )
    if code in REFUSED_CODES or (answer.status == 403 and not code):
        return fail(
            "alibaba",
            _("Alibaba Cloud refused StopInstance ({code}): {grant}").format(
                code=code or answer.status, grant=grant
            ),
        )
    if code in BAD_KEY_CODES:
        return fail(
            "alibaba",
            _("Alibaba Cloud did not accept the role's credentials ({code}): {message}").format(
                code=code, message=text
            ),
        )
    return fail(
        "alibaba",
        _("StopInstance answered {status} {code}: {message}").format(
            status=answer.status, code=code, message=text or answer.snippet()
        ),
    )
