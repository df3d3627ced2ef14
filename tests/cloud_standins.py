"""Loopback stand-ins of the clouds' metadata services and stop APIs, as documented.

* EC2 IMDSv2: ``PUT /latest/api/token`` with ``X-aws-ec2-metadata-token-ttl-seconds``
  (1-21600, else 400); GETs need ``X-aws-ec2-metadata-token`` (else 401);
  ``/latest/dynamic/instance-identity/document`` and ``/latest/meta-data/instance-life-cycle``.
* GCE metadata server: ``Metadata-Flavor: Google`` required (else 403) and sent back;
  ``/computeMetadata/v1/instance/?recursive=true``, ``project/project-id`` and
  ``instance/service-accounts/default/token``; Compute API ``POST .../instances/{name}/stop``
  answers an Operation (200) or 403 with the missing permission.
* Spot notices: EC2 ``/latest/meta-data/spot/instance-action`` and
  ``/latest/meta-data/events/recommendations/rebalance`` (404 with an empty body until set,
  then ``{"action": "terminate", "time": "2026-11-27T14:02:00Z"}`` / ``{"noticeTime": ...}``);
  GCE ``instance/preempted`` (``FALSE``/``TRUE``; ``?wait_for_change=true&timeout_sec=N``
  hangs until it changes or N seconds pass); Azure ``/metadata/scheduledevents`` (``{"DocumentIncarnation",
  "Events": [...]}``, a Spot eviction an event of ``EventType`` ``Preempt``).
* Azure IMDS: ``Metadata: true`` required (else 400); ``/metadata/instance`` and
  ``/metadata/identity/oauth2/token`` (400 "Identity not found" without an identity); ARM
  ``POST .../virtualMachines/{vm}/deallocate`` answers 202 Accepted or 403
  AuthorizationFailed.
* RunPod REST: ``POST /v1/pods/{podId}/stop`` with ``Authorization: Bearer <key>``.
* Vast.ai: ``PUT /api/v0/instances/{id}/`` ``{"state": "stopped"}`` with ``Authorization:
  Bearer <CONTAINER_API_KEY>`` (what ``vastai stop instance`` sends): ``{"success": true}``.
* Lambda's Cloud API: ``GET /api/v1/instances/{id}`` and ``POST
  /api/v1/instance-operations/terminate`` ``{"instance_ids": [...]}`` with ``Authorization:
  Bearer <key>``; errors ``{"error": {"code", "message", "suggestion"}}``:
  ``global/invalid-api-key`` (401), ``global/account-inactive`` (403),
  ``global/object-does-not-exist`` (404).
* Alibaba Cloud ECS (``Cloud(metadata="alibaba")``): the metadata service's hardened mode
  (``PUT /latest/api/token`` with ``X-aliyun-ecs-metadata-token-ttl-seconds`` 1-21600, else
  400; GETs with ``X-aliyun-ecs-metadata-token``, else 401 when ``alibaba_hardened``),
  ``/latest/dynamic/instance-identity/document``, the RAM role's name and credentials under
  ``/latest/meta-data/ram/security-credentials/`` (404 without a role); and the ECS API:
  an RPC ``POST /`` form, its HMAC-SHA1 signature checked (computed here on its own, from
  the documented rule), answering ``{"RequestId"}`` or ``{"Code", "Message"}``:
  ``InvalidAccessKeyId.NotFound`` (404), ``InvalidSecurityToken.Expired`` (400),
  ``SignatureDoesNotMatch`` (400), ``Forbidden.RAM`` (403).

And the hostile answers a client must survive: a refusal whose body echoes the credential
it was sent, any status, raw bodies of any size for any path, an answer that is not HTTP
(echoing the credential too), and an answer that comes late.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

IMDS_TOKEN = "AQAEAImds-session-token-secret"
ALIBABA_METADATA_TOKEN = "aliyun-metadata-token-secret"
ALIBABA_KEY_ID = "STS.NTfp9uWmHCEr0secretid"
ALIBABA_KEY_SECRET = "Hd6rdcsp3wmx0secretsecret"
#: an STS token is base64: "+", "/" and "=" are in it, and are encoded when sent or quoted
ALIBABA_STS_TOKEN = "CAIS8gF1q6Ft5B2yfSjIr5+secret/token+Ba4gHXw=="
ALIBABA_ROLE = "gpucost-stopper"
GCE_TOKEN = "ya29.gce-secret-token"
AZURE_TOKEN = "eyJ0eXAi.azure-secret-token"
RUNPOD_KEY = "rpa_secret_key"
LAMBDA_KEY = "secret_lambda-key_4f1c2b7e9a8d4c6b"
VAST_KEY = "0f3c9a7e2b5d4c1a8e6f0b9d7c3a5e1f2b4d6c8a0e9f7b5d3c1a2e4f6b8d0c9a"


@dataclass
class Cloud:
    """What the stand-ins answer, and every request they saw."""

    aws_identity: dict[str, Any] = field(
        default_factory=lambda: {
            "accountId": "123456789012",
            "architecture": "x86_64",
            "availabilityZone": "us-east-1a",
            "imageId": "ami-0abcdef1234567890",
            "instanceId": "i-0123456789abcdef0",
            "instanceType": "p5.48xlarge",
            "pendingTime": "2026-11-25T09:00:00Z",
            "privateIp": "10.0.0.12",
            "region": "us-east-1",
            "version": "2017-09-30",
        }
    )
    aws_life_cycle: str = "on-demand"
    gce_instance: dict[str, Any] = field(
        default_factory=lambda: {
            "id": 4520031799277581759,
            "machineType": "projects/123456789012/machineTypes/a3-highgpu-1g",
            "name": "train-1",
            "zone": "projects/123456789012/zones/us-central1-a",
            "scheduling": {
                "automaticRestart": "FALSE",
                "onHostMaintenance": "TERMINATE",
                "preemptible": "TRUE",
                "provisioningModel": "SPOT",
            },
        }
    )
    gce_project: str = "my-project"
    #: EC2's spot/instance-action document (``None``: 404, nothing pending)
    aws_instance_action: dict[str, Any] | None = None
    #: EC2's rebalance recommendation (``None``: 404)
    aws_rebalance: dict[str, Any] | None = None
    #: GCE's instance/preempted
    gce_preempted: bool = False
    #: Azure's scheduled events (each as documented: EventId, EventType, ResourceType,
    #: Resources, EventStatus, NotBefore, Description, EventSource, DurationInSeconds)
    azure_events: list[dict[str, Any]] = field(default_factory=list)
    azure_incarnation: int = 1
    #: the Lambda instance the key may see and terminate
    lambda_instance: str = "0920582c7ff041399e34823a0be62549"
    #: the Vast.ai instance the key may manage
    vast_instance: str = "28493017"
    #: its ``dph_total`` (dollars per hour, all in) as ``show instance`` answers it
    vast_dph_total: object = 0.412
    vast_gpu_name: str = "RTX 4090"
    vast_num_gpus: object = 1
    #: the RunPod pod the key may see, and its GraphQL ``costPerHr``/``adjustedCostPerHr``
    runpod_pod: str = "8y5rumuc2qaq3c"
    runpod_cost_per_hr: object = 0.69
    runpod_adjusted_cost_per_hr: object = 0.69
    runpod_gpu: str = "RTX 4090"
    #: the Lambda instance type's ``price_cents_per_hour``
    lambda_price_cents: object = 129
    #: which cloud answers under /latest/: "aws" (EC2 IMDS) or "alibaba" (ECS metadata)
    metadata: str = "aws"
    #: the ECS metadata service is in hardened mode (a token is required)
    alibaba_hardened: bool = True
    alibaba_identity: dict[str, Any] = field(
        default_factory=lambda: {
            "zone-id": "cn-hangzhou-i",
            "serial-number": "4acd2b47-b328-4762-852f-998a3b1c2d3e",
            "instance-id": "i-bp1iw9u3m0adiz4ag1x2",
            "region-id": "cn-hangzhou",
            "private-ipv4": "192.168.0.12",
            "owner-account-id": "1609123456789012",
            "mac": "00:16:3e:0f:12:34",
            "image-id": "aliyun_3_x64_20G_alibase_20210425.vhd",
            "instance-type": "ecs.gn7i-c8g1.2xlarge",
        }
    )
    #: the key the ECS API knows for the role (another: InvalidAccessKeyId.NotFound)
    alibaba_known_key: str = ALIBABA_KEY_ID
    #: the secret the ECS API checks signatures with (another: SignatureDoesNotMatch)
    alibaba_api_secret: str = ALIBABA_KEY_SECRET
    #: the ECS API's calls, each its form's fields
    ecs_calls: list[dict[str, str]] = field(default_factory=list)
    azure_compute: dict[str, Any] = field(
        default_factory=lambda: {
            "location": "eastus",
            "name": "gpu-vm",
            "priority": "Regular",
            "resourceGroupName": "ml-rg",
            "subscriptionId": "8d10da13-8125-4ba9-a717-bf7490507b3d",
            "vmId": "02aab8a4-74ef-476e-8182-f6d2ba4166a6",
            "vmSize": "Standard_NC24ads_A100_v4",
        }
    )
    #: the VM's identity may stop it (False: 403 with the missing permission)
    allowed: bool = True
    #: the VM has a service account / managed identity
    identity: bool = True
    #: the status of a refusal (``allowed=False``): 403 as documented, or any other
    refusal_status: int = 403
    #: a refusal's body quotes the credential the request carried
    echo_credentials: bool = False
    #: path -> the body answered (200) instead of the documented one
    raw: dict[str, bytes] = field(default_factory=dict)
    #: every answer is this line, not HTTP, with the request's credential appended
    garbage: bytes = b""
    #: seconds to wait before answering
    delay_s: float = 0.0
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    #: the request's body (PUT, POST)
    body: bytes = b""

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        if isinstance(body, bytes):
            data = body
        else:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        # a client that reads a bounded part of a huge body hangs up
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)

    def _credential(self) -> str:
        return self.headers.get("Authorization") or self.headers.get("X-aws-ec2-metadata-token", "")

    def _refuse(self, body: dict[str, Any]) -> None:
        cloud = self.server.cloud
        if cloud.echo_credentials:
            body = {"request": {"Authorization": self._credential()}, **body}
        self._send(cloud.refusal_status, body)

    def do_PUT(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length)
        self._route("PUT")

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length)
        self._route("POST")

    def _route(self, method: str) -> None:
        cloud = self.server.cloud
        url = urlsplit(self.path)
        cloud.requests.append((method, self.path, dict(self.headers.items())))
        path = url.path
        if cloud.delay_s:
            time.sleep(cloud.delay_s)
        if cloud.garbage:
            self.close_connection = True
            self.wfile.write(cloud.garbage + b" " + self._credential().encode() + b"\r\n\r\n")
            return None
        if path in cloud.raw:
            return self._send(200, cloud.raw[path], {"Metadata-Flavor": "Google"})
        if path.startswith("/latest/") and cloud.metadata == "alibaba":
            return self._alibaba_metadata(method, path)
        if path.startswith("/latest/"):
            return self._aws(method, path)
        if path == "/" and method == "POST":
            return self._ecs()
        if path.startswith("/computeMetadata/"):
            return self._gce(path, url.query)
        if path.startswith("/compute/v1/"):
            return self._compute(method, path)
        if path.startswith("/metadata/"):
            return self._azure_imds(path, url.query)
        if path.startswith("/subscriptions/"):
            return self._arm(method, path, url.query)
        if path.startswith("/v1/pods/"):
            return self._runpod(method, path)
        if path == "/graphql":
            return self._runpod_graphql(method)
        if path.startswith("/api/v0/instances/"):
            return self._vast(method, path)
        if path.startswith("/api/v1/"):
            return self._lambda(method, path)
        self._send(404, "not found")

    # -- EC2 IMDSv2 -------------------------------------------------------------------
    def _aws(self, method: str, path: str) -> None:
        cloud = self.server.cloud
        if path == "/latest/api/token":
            ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
            if method != "PUT" or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return self._send(400, "")
            return self._send(200, IMDS_TOKEN, {"X-aws-ec2-metadata-token-ttl-seconds": ttl})
        if self.headers.get("X-aws-ec2-metadata-token") != IMDS_TOKEN:
            return self._send(401, "")
        if path == "/latest/dynamic/instance-identity/document":
            return self._send(200, cloud.aws_identity, {"Content-Type": "text/plain"})
        if path == "/latest/meta-data/instance-life-cycle":
            return self._send(200, cloud.aws_life_cycle, {"Content-Type": "text/plain"})
        if path == "/latest/meta-data/spot/instance-action" and cloud.aws_instance_action:
            return self._send(200, cloud.aws_instance_action, {"Content-Type": "text/plain"})
        if path == "/latest/meta-data/events/recommendations/rebalance" and cloud.aws_rebalance:
            return self._send(200, cloud.aws_rebalance, {"Content-Type": "text/plain"})
        return self._send(404, "")

    # -- GCE metadata server and Compute API -------------------------------------------
    def _gce(self, path: str, query: str) -> None:
        cloud = self.server.cloud
        flavor = {"Metadata-Flavor": "Google"}
        if self.headers.get("Metadata-Flavor") != "Google":
            return self._send(403, "Missing Metadata-Flavor:Google header.", flavor)
        if path == "/computeMetadata/v1/instance/" and "recursive=true" in query:
            return self._send(
                200, cloud.gce_instance, {**flavor, "Content-Type": "application/json"}
            )
        if path == "/computeMetadata/v1/instance/preempted":
            params = parse_qs(query)
            if params.get("wait_for_change") == ["true"]:
                # a hanging GET: answers when the value changes or timeout_sec passes
                was = cloud.gce_preempted
                wait_s = float(params.get("timeout_sec", ["300"])[0])
                end = time.monotonic() + wait_s
                while cloud.gce_preempted == was and time.monotonic() < end:
                    time.sleep(0.05)
            text = "TRUE" if cloud.gce_preempted else "FALSE"
            return self._send(200, text, {**flavor, "Content-Type": "application/text"})
        if path == "/computeMetadata/v1/project/project-id":
            return self._send(200, cloud.gce_project, flavor)
        if path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if not cloud.identity:
                return self._send(404, "Not Found", flavor)
            token = {"access_token": GCE_TOKEN, "expires_in": 3599, "token_type": "Bearer"}
            return self._send(200, token, {**flavor, "Content-Type": "application/json"})
        return self._send(404, "Not Found", flavor)

    def _compute(self, method: str, path: str) -> None:
        cloud = self.server.cloud
        if self.headers.get("Authorization") != f"Bearer {GCE_TOKEN}":
            return self._send(401, {"error": {"code": 401, "message": "Invalid Credentials"}})
        parts = path.split("/")
        # /compute/v1/projects/{p}/zones/{z}/instances/{name}/stop
        if method != "POST" or len(parts) != 10 or parts[-1] != "stop":
            return self._send(404, {"error": {"code": 404, "message": "Not Found"}})
        project, zone, name = parts[4], parts[6], parts[8]
        target = f"projects/{project}/zones/{zone}/instances/{name}"
        if not cloud.allowed:
            message = f"Required 'compute.instances.stop' permission for '{target}'"
            error = {"code": 403, "message": message, "errors": [{"reason": "forbidden"}]}
            return self._refuse({"error": error})
        cloud.stopped.append(target)
        operation = {
            "kind": "compute#operation",
            "id": "7127550864823803662",
            "name": "operation-1732526400000-stop",
            "operationType": "stop",
            "status": "RUNNING",
            "targetLink": f"https://compute.googleapis.com/compute/v1/{target}",
        }
        return self._send(200, operation, {"Content-Type": "application/json"})

    # -- Azure IMDS and ARM ---------------------------------------------------------------
    def _azure_imds(self, path: str, query: str) -> None:
        cloud = self.server.cloud
        if self.headers.get("Metadata") != "true":
            error = {"error": "Bad request. Required metadata header not specified"}
            return self._send(400, error)
        params = parse_qs(query)
        if "api-version" not in params:
            return self._send(400, {"error": "Bad request. api-version was not specified"})
        if path == "/metadata/instance":
            return self._send(200, {"compute": cloud.azure_compute, "network": {"interface": []}})
        if path == "/metadata/scheduledevents":
            document = {
                "DocumentIncarnation": cloud.azure_incarnation,
                "Events": cloud.azure_events,
            }
            return self._send(200, document, {"Content-Type": "application/json"})
        if path == "/metadata/identity/oauth2/token":
            if not cloud.identity:
                error = {"error": "invalid_request", "error_description": "Identity not found"}
                return self._send(400, error)
            token = {
                "access_token": AZURE_TOKEN,
                "expires_in": "86399",
                "resource": params.get("resource", [""])[0],
                "token_type": "Bearer",
            }
            return self._send(200, token)
        return self._send(404, {"error": "Not found"})

    def _arm(self, method: str, path: str, query: str) -> None:
        cloud = self.server.cloud
        if self.headers.get("Authorization") != f"Bearer {AZURE_TOKEN}":
            return self._send(401, {"error": {"code": "InvalidAuthenticationToken"}})
        if method != "POST" or not path.endswith("/deallocate") or "api-version" not in query:
            return self._send(404, {"error": {"code": "NotFound"}})
        scope = path.rsplit("/deallocate", 1)[0]
        if not cloud.allowed:
            message = (
                "The client does not have authorization to perform action "
                f"'Microsoft.Compute/virtualMachines/deallocate/action' over scope '{scope}'"
            )
            return self._refuse({"error": {"code": "AuthorizationFailed", "message": message}})
        cloud.stopped.append(scope)
        return self._send(202, "", {"Azure-AsyncOperation": f"{scope}/operations/1"})

    # -- Alibaba Cloud ECS ----------------------------------------------------------------
    def _alibaba_metadata(self, method: str, path: str) -> None:
        cloud = self.server.cloud
        if path == "/latest/api/token":
            ttl = self.headers.get("X-aliyun-ecs-metadata-token-ttl-seconds", "")
            if method != "PUT" or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return self._send(400, "")
            return self._send(200, ALIBABA_METADATA_TOKEN)
        token = self.headers.get("X-aliyun-ecs-metadata-token")
        if token != ALIBABA_METADATA_TOKEN and (cloud.alibaba_hardened or token is not None):
            return self._send(401, "")
        if path == "/latest/dynamic/instance-identity/document":
            return self._send(200, cloud.alibaba_identity, {"Content-Type": "text/plain"})
        credentials = "/latest/meta-data/ram/security-credentials/"
        if path.startswith(credentials):
            if not cloud.identity:
                return self._send(404, "")
            role = path[len(credentials) :]
            if role == "":
                return self._send(200, ALIBABA_ROLE)
            if role != ALIBABA_ROLE:
                return self._send(404, "")
            return self._send(
                200,
                {
                    "AccessKeyId": ALIBABA_KEY_ID,
                    "AccessKeySecret": ALIBABA_KEY_SECRET,
                    "Expiration": "2026-11-27T14:00:00Z",
                    "SecurityToken": ALIBABA_STS_TOKEN,
                    "LastUpdated": "2026-11-27T08:00:00Z",
                    "Code": "Success",
                },
            )
        return self._send(404, "")

    def _ecs(self) -> None:
        cloud = self.server.cloud
        form = {k: v[0] for k, v in parse_qs(self.body.decode(), keep_blank_values=True).items()}
        cloud.ecs_calls.append(form)
        request_id = "473469C7-AA6F-4DC5-B3DB-A3DC0DE3C83E"

        def error(status: int, code: str, message: str) -> None:
            body: dict[str, Any] = {
                "RequestId": request_id,
                "HostId": "ecs.cn-hangzhou.aliyuncs.com",
                "Code": code,
                "Message": message,
            }
            if cloud.echo_credentials:
                body["Recommend"] = form.get("SecurityToken", "") + form.get("AccessKeyId", "")
            self._send(status, body, {"Content-Type": "application/json"})

        if form.get("AccessKeyId") != cloud.alibaba_known_key:
            return error(404, "InvalidAccessKeyId.NotFound", "Specified access key is not found.")
        if form.get("SecurityToken") != ALIBABA_STS_TOKEN:
            return error(400, "InvalidSecurityToken.Expired", "Specified SecurityToken is expired.")
        if form.get("Signature") != _rpc_signature(form, cloud.alibaba_api_secret):
            # as Alibaba answers it: the string it signed quoted whole, every parameter in
            # it (the key id and the STS token too) encoded twice (NewFuture/DDNS#57)
            return error(
                400,
                "SignatureDoesNotMatch",
                "Specified signature is not matched with our calculation. server string to "
                f"sign is:{_string_to_sign(form)}",
            )
        if form.get("Action") != "StopInstance" or not form.get("InstanceId"):
            return error(400, "MissingParameter", "The input parameter is missing.")
        if not cloud.allowed:
            if cloud.refusal_status != 403:
                return self._send(cloud.refusal_status, "upstream trouble")
            return error(
                403,
                "Forbidden.RAM",
                "User not authorized to operate on the specified resource, or this API "
                "doesn't support RAM.",
            )
        cloud.stopped.append(f"{form['InstanceId']}:{form.get('StoppedMode', '')}")
        return self._send(200, {"RequestId": request_id}, {"Content-Type": "application/json"})

    # -- Lambda -------------------------------------------------------------------------
    def _lambda_instance(self, status: str) -> dict[str, Any]:
        cloud = self.server.cloud
        return {
            "id": cloud.lambda_instance,
            "name": "training-node-1",
            "ip": "198.51.100.2",
            "private_ip": "10.19.60.24",
            "status": status,
            "ssh_key_names": ["macbook-pro"],
            "file_system_names": ["shared-fs"],
            "region": {"name": "us-east-1", "description": "Virginia, USA"},
            "instance_type": {
                "name": "gpu_1x_a100_sxm4",
                "description": "1x A100 (40 GB SXM4)",
                "gpu_description": "A100 (40 GB SXM4)",
                "price_cents_per_hour": cloud.lambda_price_cents,
                "specs": {"vcpus": 30, "memory_gib": 200, "storage_gib": 512, "gpus": 1},
            },
            "hostname": "10-19-60-24.cloud.lambdalabs.com",
        }

    def _lambda(self, method: str, path: str) -> None:
        cloud = self.server.cloud

        def error(status: int, code: str, message: str, suggestion: str | None) -> None:
            body = {"error": {"code": code, "message": message, "suggestion": suggestion}}
            if cloud.echo_credentials and status != 401:
                body["error"]["message"] = f"{message} ({self._credential()})"
            self._send(status, body, {"Content-Type": "application/json"})

        if self.headers.get("Authorization") != f"Bearer {LAMBDA_KEY}":
            return error(
                401,
                "global/invalid-api-key",
                "API key was invalid, expired, or deleted.",
                "Check your API key or create a new one, then try again.",
            )
        if not cloud.allowed:
            if cloud.refusal_status != 403:
                return self._send(cloud.refusal_status, "Bad Gateway")
            return error(403, "global/account-inactive", "Your account is inactive.", None)
        missing = ("global/object-does-not-exist", "Specified instance does not exist.", None)
        if method == "GET" and path.startswith("/api/v1/instances/"):
            if path.rsplit("/", 1)[-1] != cloud.lambda_instance:
                return error(404, *missing)
            return self._send(200, {"data": self._lambda_instance("active")})
        if method == "POST" and path == "/api/v1/instance-operations/terminate":
            try:
                ids = json.loads(self.body).get("instance_ids")
            except (ValueError, AttributeError):
                ids = None
            if not isinstance(ids, list) or not ids:
                return error(400, "global/invalid-parameters", "Invalid request body.", None)
            if any(i != cloud.lambda_instance for i in ids):
                return error(404, *missing)
            cloud.stopped.extend(ids)
            terminated = [self._lambda_instance("terminating")]
            return self._send(200, {"data": {"terminated_instances": terminated}})
        return error(404, "global/object-does-not-exist", "Not found.", None)

    # -- Vast.ai ------------------------------------------------------------------------
    def _vast(self, method: str, path: str) -> None:
        """``PUT /api/v0/instances/{id}/`` ``{"state": "stopped"}`` (vast-ai/vast-cli's
        ``stop instance``): ``{"success": true}``; a wrong key 401, another's instance 403,
        an unknown id 404 ``{"success": false, "error": ...}``."""
        cloud = self.server.cloud
        if self.headers.get("Authorization") != f"Bearer {VAST_KEY}":
            return self._send(401, {"success": False, "error": "invalid_user", "msg": "bad key"})
        parts = path.split("/")
        if method == "GET" and len(parts) == 6 and parts[4].isdigit() and parts[5] == "":
            return self._vast_show(parts[4])
        if method != "PUT" or len(parts) != 6 or not parts[4].isdigit() or parts[5] != "":
            return self._send(404, {"success": False, "error": "not_found"})
        try:
            state = json.loads(self.body).get("state")
        except (ValueError, AttributeError):
            state = None
        if state != "stopped":
            return self._send(400, {"success": False, "error": "invalid_args"})
        if not cloud.allowed:
            return self._refuse({"success": False, "error": "forbidden", "msg": "not yours"})
        if parts[4] != cloud.vast_instance:
            return self._send(404, {"success": False, "error": "no_such_instance"})
        cloud.stopped.append(parts[4])
        return self._send(200, {"success": True})

    def _vast_show(self, instance: str) -> None:
        """``GET /api/v0/instances/{id}/?owner=me`` (vast-cli's ``show instance``):
        ``{"instances": {...}}``, ``null`` for an instance the key does not own."""
        cloud = self.server.cloud
        if instance != cloud.vast_instance:
            return self._send(200, {"instances": None})
        row = {
            "id": int(instance),
            "machine_id": 18213,
            "actual_status": "running",
            "cur_state": "running",
            "gpu_name": cloud.vast_gpu_name,
            "num_gpus": cloud.vast_num_gpus,
            "gpu_ram": 24564,
            "dph_base": 0.35,
            "dph_total": cloud.vast_dph_total,
            "storage_cost": 0.15,
            "inet_up_cost": 0.004,
            "inet_down_cost": 0.004,
            "disk_space": 50.0,
            "start_date": 1764403200.5,
            "label": None,
            "extra_env": [],
        }
        return self._send(200, {"instances": row}, {"Content-Type": "application/json"})

    # -- RunPod -------------------------------------------------------------------------
    def _runpod_graphql(self, method: str) -> None:
        """``POST /graphql`` (runpod-python's ``get_pod``): ``{"data": {"pod": ...}}``,
        ``{"errors": [...]}`` for a bad query, ``pod: null`` for a pod the key cannot see."""
        cloud = self.server.cloud
        if self.headers.get("Authorization") != f"Bearer {RUNPOD_KEY}":
            return self._send(401, {"errors": [{"message": "Unauthorized"}]})
        try:
            sent = json.loads(self.body)
            pod_id = sent["variables"]["input"]["podId"]
            query = sent["query"]
        except (ValueError, KeyError, TypeError):
            return self._send(400, {"errors": [{"message": "Must provide query string."}]})
        if method != "POST" or "costPerHr" not in query:
            return self._send(400, {"errors": [{"message": "Syntax Error"}]})
        if pod_id != cloud.runpod_pod:
            return self._send(200, {"data": {"pod": None}})
        pod = {
            "id": pod_id,
            "costPerHr": cloud.runpod_cost_per_hr,
            "adjustedCostPerHr": cloud.runpod_adjusted_cost_per_hr,
            "gpuCount": 1,
            "machine": {"gpuDisplayName": cloud.runpod_gpu},
        }
        return self._send(200, {"data": {"pod": pod}}, {"Content-Type": "application/json"})

    def _runpod(self, method: str, path: str) -> None:
        cloud = self.server.cloud
        if self.headers.get("Authorization") != f"Bearer {RUNPOD_KEY}":
            return self._send(401, {"error": "unauthorized"})
        parts = path.split("/")
        if method != "POST" or len(parts) != 5 or parts[-1] != "stop":
            return self._send(404, {"error": "not found"})
        if not cloud.allowed:
            return self._refuse({"error": "forbidden"})
        cloud.stopped.append(parts[3])
        return self._send(200, {"id": parts[3], "desiredStatus": "EXITED"})


def _percent(text: str) -> str:
    """RPC's encoding, written from the documented rule: A-Z a-z 0-9 - _ . ~ as they are,
    every other byte of the UTF-8 text as %XY."""
    keep = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~"
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in text.encode())


def _string_to_sign(form: dict[str, str]) -> str:
    query = "&".join(
        f"{_percent(k)}={_percent(v)}" for k, v in sorted(form.items()) if k != "Signature"
    )
    return "POST&%2F&" + _percent(query)


def _rpc_signature(form: dict[str, str], secret: str) -> str:
    to_sign = _string_to_sign(form)
    mac = hmac.new((secret + "&").encode(), to_sign.encode(), hashlib.sha1).digest()
    return base64.b64encode(mac).decode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    cloud: Cloud


@dataclass
class StandIn:
    url: str
    host: str
    cloud: Cloud

    def paths(self) -> list[str]:
        return [p for _, p, _ in self.cloud.requests]


def serve(cloud: Cloud | None = None) -> Iterator[StandIn]:
    """Serve the stand-ins on a free loopback port until the generator is closed."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.cloud = cloud or Cloud()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host = f"127.0.0.1:{server.server_address[1]}"
    try:
        yield StandIn(f"http://{host}", host, server.cloud)
    finally:
        server.shutdown()
        server.server_close()


def azure_preempt(not_before: str, vm: str = "gpu-vm") -> dict[str, Any]:
    """A Spot VM's eviction as Scheduled Events documents it (``NotBefore`` RFC 1123)."""
    return {
        "EventId": "A123BC45-1234-5678-AB90-ABCDEF123456",
        "EventStatus": "Scheduled",
        "EventType": "Preempt",
        "ResourceType": "VirtualMachine",
        "Resources": [vm],
        "NotBefore": not_before,
        "Description": "",
        "EventSource": "Platform",
        "DurationInSeconds": -1,
    }


def write_dmi(folder: Any, provider: str) -> str:
    """DMI files as each cloud's machines show them."""
    files = {
        "aws": {
            "sys_vendor": "Amazon EC2",
            "product_name": "p5.48xlarge",
            "board_asset_tag": "i-0123456789abcdef0",
        },
        "gcp": {"sys_vendor": "Google", "product_name": "Google Compute Engine"},
        "alibaba": {"sys_vendor": "Alibaba Cloud", "product_name": "Alibaba Cloud ECS"},
        "azure": {
            "sys_vendor": "Microsoft Corporation",
            "product_name": "Virtual Machine",
            "chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77",
        },
    }[provider]
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text + "\n")
    return str(folder)
