"""Reads the machine's identity: DMI files, the environment, then its metadata service.

A metadata service is asked only when the DMI fields name that cloud
(:func:`jupyter_gpucost.core.machine.cloud_from_dmi`): a machine that is no cloud spends
no time and sends no packet. Every request is bounded by ``timeout_s``; the answer is kept
for the life of the process (:func:`detect`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..core.machine import (
    DMI_FILES,
    ENV_NAMES,
    LocalSignals,
    Machine,
    MetadataError,
    Provider,
    cloud_from_dmi,
    from_dmi,
    from_environment,
    from_setting,
    parse_aws,
    parse_azure,
    parse_gcp,
)
from . import alibaba, lambda_cloud
from .http import HttpFailure, request

DEFAULT_DMI_PATH = "/sys/class/dmi/id"
#: the documented endpoints; the first two are overridden by the SDKs' own variables
AWS_IMDS = "http://169.254.169.254"
GCE_METADATA_HOST = "metadata.google.internal"
AZURE_IMDS = "http://169.254.169.254"
AZURE_API_VERSION = "2021-02-01"
#: seconds an IMDSv2 session token lives (the least the detection needs)
IMDS_TOKEN_TTL_S = 60


@dataclass(frozen=True)
class Endpoints:
    """Where the metadata services answer (the real ones unless set)."""

    aws_imds: str = AWS_IMDS
    gce_metadata_host: str = GCE_METADATA_HOST
    azure_imds: str = AZURE_IMDS
    alibaba_metadata: str = alibaba.ALIBABA_METADATA

    @classmethod
    def from_environ(
        cls,
        environ: Mapping[str, str],
        *,
        azure_imds: str,
        alibaba_metadata: str = alibaba.ALIBABA_METADATA,
    ) -> Endpoints:
        """AWS's and Google's SDK variables, as their own SDKs read them."""
        return cls(
            aws_imds=environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "") or AWS_IMDS,
            gce_metadata_host=environ.get("GCE_METADATA_HOST", "") or GCE_METADATA_HOST,
            azure_imds=azure_imds or AZURE_IMDS,
            alibaba_metadata=alibaba_metadata or alibaba.ALIBABA_METADATA,
        )

    def gce_base(self) -> str:
        host = self.gce_metadata_host
        return host.rstrip("/") if "://" in host else f"http://{host}"


@dataclass(frozen=True)
class DetectSettings:
    dmi_path: str = DEFAULT_DMI_PATH
    endpoints: Endpoints = Endpoints()
    timeout_s: float = 1.0
    #: the provider the admin named (``c.GpuCost.machine_provider``: "lambda", "autodl"),
    #: with the instance's id where its API needs one ("" : detected)
    provider: str = ""
    instance_id: str = ""
    #: Lambda's Cloud API and its key (asked only where the admin named Lambda)
    lambda_api_url: str = lambda_cloud.LAMBDA_API
    lambda_api_key: str = field(default="", repr=False)


def read_signals(dmi_path: str, environ: Mapping[str, str]) -> LocalSignals:
    """The DMI fields that exist (unreadable ones are left out) and the known variables."""
    dmi: dict[str, str] = {}
    base = Path(dmi_path)
    for name in DMI_FILES:
        try:
            dmi[name] = (base / name).read_text(errors="replace").strip()
        except OSError:
            continue
    env = {k: environ[k] for k in ENV_NAMES if environ.get(k)}
    return LocalSignals(dmi=dmi, env=env)


def _aws(endpoints: Endpoints, timeout_s: float, shared: bool) -> Machine:
    base = endpoints.aws_imds.rstrip("/")
    token = request(
        "PUT",
        f"{base}/latest/api/token",
        headers={"X-aws-ec2-metadata-token-ttl-seconds": str(IMDS_TOKEN_TTL_S)},
        timeout_s=timeout_s,
    )
    if token.status != 200:
        raise MetadataError(f"EC2 IMDSv2 refused a session token ({token.status})")
    headers = {"X-aws-ec2-metadata-token": token.body.strip()}
    doc = request(
        "GET",
        f"{base}/latest/dynamic/instance-identity/document",
        headers=headers,
        timeout_s=timeout_s,
    )
    if doc.status != 200:
        raise MetadataError(f"EC2 IMDS answered {doc.status} for the identity document")
    cycle = request(
        "GET", f"{base}/latest/meta-data/instance-life-cycle", headers=headers, timeout_s=timeout_s
    )
    return parse_aws(doc.body, cycle.body if cycle.status == 200 else "", shared=shared)


def _gcp(endpoints: Endpoints, timeout_s: float, shared: bool) -> Machine:
    base = f"{endpoints.gce_base()}/computeMetadata/v1"
    headers = {"Metadata-Flavor": "Google"}
    doc = request("GET", f"{base}/instance/?recursive=true", headers=headers, timeout_s=timeout_s)
    if doc.status != 200 or doc.headers.get("Metadata-Flavor") != "Google":
        raise MetadataError(f"the GCE metadata server answered {doc.status}")
    project = request("GET", f"{base}/project/project-id", headers=headers, timeout_s=timeout_s)
    return parse_gcp(doc.body, project.body if project.status == 200 else "", shared=shared)


def _azure(endpoints: Endpoints, timeout_s: float, shared: bool) -> Machine:
    url = f"{endpoints.azure_imds.rstrip('/')}/metadata/instance?api-version={AZURE_API_VERSION}"
    doc = request("GET", url, headers={"Metadata": "true"}, timeout_s=timeout_s)
    if doc.status != 200:
        raise MetadataError(f"Azure IMDS answered {doc.status}")
    return parse_azure(doc.body, shared=shared)


def _alibaba(endpoints: Endpoints, timeout_s: float, shared: bool) -> Machine:
    return alibaba.read_machine(endpoints.alibaba_metadata, timeout_s, shared)


_READERS = {"aws": _aws, "gcp": _gcp, "azure": _azure, "alibaba": _alibaba}


def identify(settings: DetectSettings, environ: Mapping[str, str]) -> Machine | None:
    """The machine, or ``None`` when no local signal names a cloud (nothing is sent)."""
    signals = read_signals(settings.dmi_path, environ)
    shared = bool(signals.env.get("KUBERNETES_SERVICE_HOST"))
    named = from_setting(settings.provider, settings.instance_id, shared=shared)
    if named is not None and named.provider == "lambda":
        try:
            return lambda_cloud.read_machine(
                settings.lambda_api_url,
                settings.lambda_api_key,
                named.instance_id,
                settings.timeout_s,
                shared,
            )
        except (HttpFailure, MetadataError) as e:
            return replace(named, note=str(e))
    if named is not None:
        return named
    provider: Provider | None = cloud_from_dmi(signals.dmi)
    if provider is None:
        return from_environment(signals.env)
    try:
        return _READERS[provider](settings.endpoints, settings.timeout_s, shared)
    except (HttpFailure, MetadataError) as e:
        return from_dmi(provider, signals, note=str(e))


_cache: dict[tuple[DetectSettings, tuple[tuple[str, str], ...]], Machine | None] = {}
_lock = threading.Lock()


def detect(settings: DetectSettings, environ: Mapping[str, str]) -> Machine | None:
    """:func:`identify`, asked once per process for the same settings and variables."""
    key = (settings, tuple(sorted((k, environ.get(k, "")) for k in ENV_NAMES)))
    with _lock:
        if key not in _cache:
            _cache[key] = identify(settings, environ)
        return _cache[key]
