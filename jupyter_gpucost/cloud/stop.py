"""Stops the machine through its provider: the ``stop-instance`` budget action.

One driver per provider, each doing what the provider documents:

* AWS: EC2 ``StopInstances`` on the instance's own id, with the instance's role
  (:mod:`.aws`; an instance of a one-time Spot request cannot be stopped, only
  terminated: ``terminate-instance``);
* GCP: ``instances.stop`` with the token of the VM's service account from the metadata
  server;
* Azure: ``virtualMachines/deallocate`` with the VM's managed identity (a token from IMDS);
* Alibaba Cloud: ECS ``StopInstance`` (``StoppedMode`` as set: StopCharging by default),
  signed with the credentials of the instance's RAM role from its metadata service
  (:mod:`.alibaba`);
* RunPod: ``POST /pods/{podId}/stop`` with the pod's ``RUNPOD_API_KEY``;
* Vast.ai: ``PUT /instances/{CONTAINER_ID}/`` ``{"state": "stopped"}`` with the
  instance's own ``CONTAINER_API_KEY`` (what ``vastai stop instance`` sends);
* Lambda: ``POST /instance-operations/terminate`` with the admin's API key (Lambda's
  instances cannot be stopped, only terminated);
* AutoDL: the container runs ``shutdown``, which powers the instance off;
* or the admin's ``stop_instance_command``.

Each success carries the provider's sentence of what still bills afterwards
(:attr:`StopResult.still_bills`, a constant of :mod:`..core.machine`).

Blocking: run in a worker thread. A failure is a :class:`StopResult` whose message says
why and which permission to grant; tokens and keys never appear in it: the HTTP client
blanks out the credentials a request carried (:meth:`..http.Answer.snippet`), and
:func:`stop_instance` blanks out, as the last step, the keys of :data:`SECRET_VARIABLES`
and the AWS session's credentials, whatever a cloud echoed back.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from urllib.parse import quote

from ..core.machine import Machine
from . import alibaba, aws, lambda_cloud, rented
from .detect import Endpoints
from .http import HttpFailure, redact, request
from .outcome import StopResult, StopSettings
from .outcome import fail as _fail

__all__ = ["SECRET_VARIABLES", "StopResult", "StopSettings", "stop_instance"]

AZURE_COMPUTE_API_VERSION = "2024-07-01"
AZURE_TOKEN_API_VERSION = "2018-02-01"
#: environment variables holding credentials: never in a message
SECRET_VARIABLES = (
    "RUNPOD_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "CONTAINER_API_KEY",
    "LAMBDA_API_KEY",
)


def stop_instance(
    machine: Machine | None,
    settings: StopSettings,
    endpoints: Endpoints,
    environ: Mapping[str, str],
    *,
    terminate: bool = False,
) -> StopResult:
    """Ask the provider to stop this machine (``terminate``: to end it,
    ``terminate-instance``); never raises, and never says a credential."""
    secrets: list[str] = [environ.get(name, "") for name in SECRET_VARIABLES]
    secrets.append(settings.lambda_api_key)
    if terminate:
        result = _terminate(machine, settings, environ, secrets)
    else:
        result = _stop(machine, settings, endpoints, environ, secrets)
    return StopResult(result.ok, result.via, redact(result.message, secrets), result.still_bills)


def _stop(
    machine: Machine | None,
    settings: StopSettings,
    endpoints: Endpoints,
    environ: Mapping[str, str],
    secrets: list[str],
) -> StopResult:
    if settings.command:
        return _command(settings)
    if machine is None:
        return _fail(
            "",
            "this machine is not a detected cloud instance: set c.GpuCost.stop_instance_command",
        )
    if machine.shared:
        return _fail(
            machine.provider,
            "this server runs in a Kubernetes pod: its node is shared and is not stopped "
            "from inside",
        )
    try:
        if machine.provider == "aws":
            return aws.stop(machine, environ, secrets)
        if machine.provider == "gcp":
            return _gcp(machine, settings, endpoints)
        if machine.provider == "azure":
            return _azure(machine, settings, endpoints)
        if machine.provider == "alibaba":
            return alibaba.stop(machine, settings, endpoints.alibaba_metadata, secrets)
        if machine.provider == "runpod":
            return _runpod(machine, settings, environ)
        if machine.provider == "vast":
            return rented.stop_vast(machine, settings, environ)
        if machine.provider == "autodl":
            return rented.stop_autodl(settings)
        if machine.provider == "lambda":
            key = settings.lambda_api_key or environ.get("LAMBDA_API_KEY", "")
            return lambda_cloud.stop(machine, settings, key)
    except HttpFailure as e:
        return _fail(machine.provider, str(e))
    return _fail(
        machine.provider,
        f"no API to stop a {machine.provider} machine: set c.GpuCost.stop_instance_command",
    )


def _terminate(
    machine: Machine | None,
    settings: StopSettings,
    environ: Mapping[str, str],
    secrets: list[str],
) -> StopResult:
    if machine is None or machine.shared or not machine.terminable:
        what = "no cloud instance" if machine is None else f"a {machine.provider} machine"
        if machine is not None and machine.shared:
            what = "a Kubernetes pod on a shared node"
        return _fail(
            "" if machine is None else machine.provider,
            f"terminate-instance ends AWS and Lambda instances; this server runs on {what}",
        )
    try:
        if machine.provider == "aws":
            return aws.stop(machine, environ, secrets, terminate=True)
        key = settings.lambda_api_key or environ.get("LAMBDA_API_KEY", "")
        return lambda_cloud.stop(machine, settings, key)
    except HttpFailure as e:
        return _fail(machine.provider, str(e))


def _command(settings: StopSettings) -> StopResult:
    argv = list(settings.command)
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=settings.timeout_s * 6, check=False
        )
    except (OSError, subprocess.SubprocessError) as e:
        return _fail("command", f"c.GpuCost.stop_instance_command failed: {e}")
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout)[-300:].split())
        return _fail(
            "command", f"c.GpuCost.stop_instance_command exited with {done.returncode}: {tail}"
        )
    return StopResult(True, "command", f"stop command run: {' '.join(argv)}")


def _token(answer_body: str) -> str:
    try:
        value = json.loads(answer_body).get("access_token", "")
    except (ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def _post_stop(
    via: str,
    url: str,
    token: str,
    settings: StopSettings,
    ok: tuple[int, ...],
    refused: str,
    grant: str,
    answered: str,
) -> StopResult | None:
    """POST a stop with the instance's own bearer token: ``None`` when the cloud took it,
    else the failure (a refusal names the permission to grant)."""
    answer = request(
        "POST",
        url,
        headers={"Authorization": f"Bearer {token}"},
        body=b"",
        timeout_s=settings.timeout_s,
    )
    if answer.status in (401, 403):
        return _fail(via, f"{refused} ({answer.status}): {grant}")
    if answer.status not in ok:
        return _fail(via, f"{answered} {answer.status}: {answer.snippet()}")
    return None


def _gcp(machine: Machine, settings: StopSettings, endpoints: Endpoints) -> StopResult:
    if not (machine.project and machine.zone and machine.name):
        return _fail("gcp", "the VM's project, zone or name is not known (metadata did not answer)")
    token_url = f"{endpoints.gce_base()}/computeMetadata/v1/instance/service-accounts/default/token"
    got = request(
        "GET", token_url, headers={"Metadata-Flavor": "Google"}, timeout_s=settings.timeout_s
    )
    token = _token(got.body) if got.status == 200 else ""
    grant = (
        "grant compute.instances.stop (e.g. roles/compute.instanceAdmin.v1) on this VM to its "
        "service account, with the cloud-platform access scope"
    )
    if not token:
        return _fail("gcp", f"the VM has no service account token ({got.status}): {grant}")
    url = (
        f"{settings.gcp_compute_url.rstrip('/')}/compute/v1/projects/{quote(machine.project)}"
        f"/zones/{quote(machine.zone)}/instances/{quote(machine.name)}/stop"
    )
    refused = _post_stop(
        "gcp",
        url,
        token,
        settings,
        (200,),
        "Compute Engine refused instances.stop",
        grant,
        "instances.stop answered",
    )
    return refused or StopResult(True, "gcp", f"Compute Engine is stopping {machine.name}")


def _azure(machine: Machine, settings: StopSettings, endpoints: Endpoints) -> StopResult:
    resource = quote(settings.azure_management_url.rstrip("/") + "/", safe="")
    token_url = (
        f"{endpoints.azure_imds.rstrip('/')}/metadata/identity/oauth2/token"
        f"?api-version={AZURE_TOKEN_API_VERSION}&resource={resource}"
    )
    got = request("GET", token_url, headers={"Metadata": "true"}, timeout_s=settings.timeout_s)
    token = _token(got.body) if got.status == 200 else ""
    grant = (
        "grant Microsoft.Compute/virtualMachines/deallocate/action (e.g. the Virtual Machine "
        "Contributor role) on this VM to its managed identity"
    )
    if not token:
        return _fail(
            "azure",
            f"the VM has no managed identity token ({got.status}): turn on its system-assigned "
            f"identity and {grant}",
        )
    url = (
        f"{settings.azure_management_url.rstrip('/')}/subscriptions/"
        f"{quote(machine.subscription_id)}/resourceGroups/{quote(machine.resource_group)}"
        f"/providers/Microsoft.Compute/virtualMachines/{quote(machine.name)}/deallocate"
        f"?api-version={AZURE_COMPUTE_API_VERSION}"
    )
    refused = _post_stop(
        "azure",
        url,
        token,
        settings,
        (200, 202),
        "Azure refused deallocate",
        grant,
        "deallocate answered",
    )
    return refused or StopResult(True, "azure", f"Azure is deallocating {machine.name}")


def _runpod(machine: Machine, settings: StopSettings, environ: Mapping[str, str]) -> StopResult:
    key = environ.get("RUNPOD_API_KEY", "")
    if not key:
        return _fail(
            "runpod", "RUNPOD_API_KEY is not set: give the pod an API key allowed to stop pods"
        )
    url = f"{settings.runpod_api_url.rstrip('/')}/pods/{quote(machine.instance_id)}/stop"
    answer = request(
        "POST",
        url,
        headers={"Authorization": f"Bearer {key}"},
        body=b"",
        timeout_s=settings.timeout_s,
    )
    if answer.status in (401, 403):
        return _fail(
            "runpod",
            f"RunPod refused to stop the pod ({answer.status}): RUNPOD_API_KEY needs write "
            "access to pods",
        )
    if answer.status != 200:
        return _fail("runpod", f"RunPod answered {answer.status}: {answer.snippet()}")
    return StopResult(True, "runpod", f"RunPod is stopping pod {machine.instance_id}")
