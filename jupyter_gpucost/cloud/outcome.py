"""What a stop driver is given and what it answers (shared by the drivers of :mod:`.stop`,
:mod:`.alibaba` and :mod:`.rented`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.machine import STILL_DISKS

#: Lambda's Cloud API
LAMBDA_API = "https://cloud.lambda.ai/api/v1"
#: Alibaba Cloud's ECS API of a region ({region} is the instance's region-id)
ALIBABA_ECS_API = "https://ecs.{region}.aliyuncs.com"


@dataclass(frozen=True)
class StopSettings:
    command: tuple[str, ...] = ()
    gcp_compute_url: str = "https://compute.googleapis.com"
    azure_management_url: str = "https://management.azure.com"
    runpod_api_url: str = "https://rest.runpod.io/v1"
    alibaba_ecs_api_url: str = ALIBABA_ECS_API
    alibaba_stopped_mode: str = "StopCharging"
    vast_api_url: str = "https://console.vast.ai/api/v0"
    lambda_api_url: str = LAMBDA_API
    #: the Lambda Cloud API key (the admin's setting or ``LAMBDA_API_KEY``; never shown)
    lambda_api_key: str = field(default="", repr=False)
    #: what powers an AutoDL instance off from inside its container
    autodl_shutdown_command: tuple[str, ...] = ("shutdown",)
    timeout_s: float = 10.0


@dataclass(frozen=True)
class StopResult:
    ok: bool
    #: how: the provider, or "command" ("" when nothing could be tried)
    via: str
    message: str
    #: what still bills once it stopped (a constant of :mod:`..core.machine`)
    still_bills: str = STILL_DISKS


def fail(via: str, message: str) -> StopResult:
    return StopResult(False, via, message)
