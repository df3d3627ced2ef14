"""The machine's identity: which cloud, instance type, region, market and instance id.

Pure rules, no I/O: the adapter (:mod:`jupyter_gpucost.cloud.detect`) reads the DMI files,
the environment and, only on a machine whose local signals name that cloud, its metadata
service, and hands the texts to the functions here.

Local signals follow cloud-init's ``ds-identify``: DMI ``sys_vendor``/``product_name``/
``product_version``/``chassis_asset_tag``/``board_asset_tag`` (Alibaba Cloud's ECS VMs say
``product_name`` "Alibaba Cloud ECS", ds-identify's ``dscheck_AliYun``), and the variables
RunPod and Vast.ai set in their containers (Vast.ai documents ``CONTAINER_ID``, the
instance's id, and ``VAST_CONTAINERLABEL``: docs.vast.ai, "Docker Execution Environment",
Predefined Variables), and AutoDL's ``AutoDLContainerUUID`` and ``AutoDLRegion`` (the
variables AutoDL's developer documentation says every container has; seen quoted by its
users, not on autodl.com itself). Lambda documents no signal a server could read: the admin
names it (``c.GpuCost.machine_provider``, :func:`from_setting`). A Kubernetes pod
(``KUBERNETES_SERVICE_HOST``) shares its node: its machine is named but never priced whole
nor stopped from inside.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from .i18n import N_

Provider = Literal["aws", "gcp", "azure", "alibaba", "runpod", "vast", "lambda", "autodl"]
#: the providers whose API (or, on AutoDL, ``shutdown``) ``stop-instance`` calls
STOPPABLE = ("aws", "gcp", "azure", "alibaba", "runpod", "vast", "lambda", "autodl")
#: the providers ``terminate-instance`` can end from inside
TERMINABLE = ("aws", "lambda")
#: the providers whose metadata service is asked (only when DMI names them)
METADATA_PROVIDERS: tuple[Provider, ...] = ("aws", "gcp", "azure", "alibaba")
#: the providers no local signal names: the admin's ``c.GpuCost.machine_provider``
SETTING_PROVIDERS = ("lambda", "autodl")
#: DMI ``product_name`` of an Alibaba Cloud ECS instance (ds-identify's ``dscheck_AliYun``)
ALIBABA_PRODUCT_NAME = "alibaba cloud ecs"
#: the DMI files read (under ``c.GpuCost.dmi_path``)
DMI_FILES = (
    "sys_vendor",
    "product_name",
    "product_version",
    "chassis_asset_tag",
    "board_asset_tag",
)
#: the chassis asset tag every Azure VM carries (ds-identify's ``dscheck_Azure``)
AZURE_CHASSIS_TAG = "7783-7084-3265-9085-8269-3286-77"
#: environment variables the machine's identity is read from (nothing else is looked at)
ENV_NAMES = (
    "RUNPOD_POD_ID",
    "RUNPOD_GPU_COUNT",
    "RUNPOD_DC_ID",
    "VAST_CONTAINERLABEL",
    "CONTAINER_ID",
    "AutoDLContainerUUID",
    "AutoDLRegion",
    "KUBERNETES_SERVICE_HOST",
)


#: the longest name taken from a metadata document (instance type, region, id, ...)
MAX_FIELD_CHARS = 256


class MetadataError(ValueError):
    """A metadata document that is not what the provider documents; the message says why."""


@dataclass(frozen=True)
class Machine:
    """What this server runs on, and how that was found."""

    provider: str
    instance_type: str = ""
    region: str = ""
    #: "on-demand" or "spot" ("" when not known)
    market: str = ""
    instance_id: str = ""
    #: how it was found: "dmi", "dmi+metadata", "environment", "setting", "setting+api"
    source: str = ""
    #: a Kubernetes pod: the node is shared, never priced whole nor stopped from inside
    shared: bool = False
    # where the provider's API finds the instance (never shown: the stop drivers use them)
    zone: str = ""
    project: str = ""
    name: str = ""
    resource_group: str = ""
    subscription_id: str = ""
    #: why the metadata service gave no answer (the machine is then known from DMI only)
    note: str = ""
    #: why the machine cannot be stopped although its provider stops others (an AWS
    #: one-time Spot Instance): "" when it can, or when nothing says otherwise
    cannot_stop: str = ""

    @property
    def stoppable(self) -> bool:
        """Whether its provider's API can stop it from inside (``stop-instance``)."""
        return self.provider in STOPPABLE and not self.shared and not self.cannot_stop

    @property
    def terminable(self) -> bool:
        """Whether ``terminate-instance`` can end it from inside (AWS; Lambda, whose stop
        is a termination)."""
        return self.provider in TERMINABLE and not self.shared

    def to_json(self) -> dict[str, object]:
        """The ``machine`` object of ``GET /gpucost/api/status``."""
        return {
            "provider": self.provider,
            "instance_type": self.instance_type or None,
            "region": self.region or None,
            "market": self.market or None,
            "instance_id": self.instance_id or None,
            "source": self.source,
            "shared": self.shared,
            "stoppable": self.stoppable,
            "cannot_stop": self.cannot_stop or None,
            "note": self.note or None,
        }


@dataclass(frozen=True)
class LocalSignals:
    """The DMI fields (name -> text, stripped) and the environment variables of ENV_NAMES."""

    dmi: Mapping[str, str]
    env: Mapping[str, str]


def cloud_from_dmi(dmi: Mapping[str, str]) -> Provider | None:
    """The cloud the DMI fields name, or ``None`` (then no metadata service is asked)."""
    vendor = dmi.get("sys_vendor", "").lower()
    product = dmi.get("product_name", "").lower()
    version = dmi.get("product_version", "").lower()
    if vendor == "amazon ec2" or "amazon" in version:
        return "aws"
    if product == "google compute engine" or vendor == "google":
        return "gcp"
    if dmi.get("chassis_asset_tag", "") == AZURE_CHASSIS_TAG:
        return "azure"
    if product == ALIBABA_PRODUCT_NAME:
        return "alibaba"
    return None


def from_environment(env: Mapping[str, str]) -> Machine | None:
    """RunPod, AutoDL and Vast.ai name their containers in the environment."""
    shared = bool(env.get("KUBERNETES_SERVICE_HOST"))
    pod = env.get("RUNPOD_POD_ID", "")
    if pod:
        return Machine(
            "runpod",
            region=env.get("RUNPOD_DC_ID", ""),
            instance_id=pod,
            source="environment",
            shared=shared,
        )
    autodl = _name(env.get("AutoDLContainerUUID", ""))
    if autodl:
        return Machine(
            "autodl",
            region=_name(env.get("AutoDLRegion", "")),
            instance_id=autodl,
            source="environment",
            shared=shared,
        )
    label = env.get("VAST_CONTAINERLABEL", "")
    if label:
        # the API's instance id is CONTAINER_ID; the label reads "C.<id>"
        container = _name(env.get("CONTAINER_ID", ""))
        if not _digits(container):
            from_label = label.removeprefix("C.")
            container = from_label if _digits(from_label) else ""
        return Machine(
            "vast", instance_id=container, source="environment", shared=shared, name=_name(label)
        )
    return None


def _digits(text: str) -> bool:
    """An id of ASCII digits (what Vast.ai's API takes in its URLs)."""
    return text.isascii() and text.isdigit() and len(text) <= MAX_FIELD_CHARS


def from_setting(provider: str, instance_id: str = "", *, shared: bool = False) -> Machine | None:
    """The provider the admin named (``c.GpuCost.machine_provider``), where no signal exists."""
    if provider not in SETTING_PROVIDERS:
        return None
    return Machine(provider, instance_id=_name(instance_id), source="setting", shared=shared)


def from_dmi(provider: Provider, signals: LocalSignals, note: str = "") -> Machine:
    """The machine known from DMI alone (its metadata service did not answer)."""
    instance_id = signals.dmi.get("board_asset_tag", "") if provider == "aws" else ""
    return Machine(
        provider,
        instance_id=instance_id if instance_id.startswith("i-") else "",
        source="dmi",
        shared=bool(signals.env.get("KUBERNETES_SERVICE_HOST")),
        note=note,
    )


def _object(text: str, what: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise MetadataError(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise MetadataError(f"{what} is not a JSON object")
    return value


def _name(value: object) -> str:
    """A name fit to show and log: a short printable string (an integer id counts), or ""."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return ""
    value = value.strip()
    return value if len(value) <= MAX_FIELD_CHARS and value.isprintable() else ""


def _text(doc: Mapping[str, object], key: str, what: str) -> str:
    value = doc.get(key)
    name = _name(value) if isinstance(value, str) else ""
    if not name:
        raise MetadataError(f"{what} has no {key}")
    return name


def _optional(doc: Mapping[str, object], key: str) -> str:
    return _name(doc.get(key))


def parse_aws(identity_document: str, life_cycle: str, *, shared: bool = False) -> Machine:
    """EC2's instance identity document and ``meta-data/instance-life-cycle``."""
    what = "the EC2 instance identity document"
    doc = _object(identity_document, what)
    cycle = life_cycle.strip()
    return Machine(
        "aws",
        instance_type=_text(doc, "instanceType", what),
        region=_text(doc, "region", what),
        market="spot" if cycle == "spot" else "on-demand",
        instance_id=_text(doc, "instanceId", what),
        source="dmi+metadata",
        shared=shared,
        zone=_optional(doc, "availabilityZone"),
    )


def _last(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def parse_gcp(instance_document: str, project_id: str, *, shared: bool = False) -> Machine:
    """GCE's ``computeMetadata/v1/instance/?recursive=true`` and ``project/project-id``."""
    what = "the GCE instance metadata"
    doc = _object(instance_document, what)
    zone = _last(_text(doc, "zone", what))
    if not zone:
        raise MetadataError(f"{what} has no zone")
    machine_type = _last(_text(doc, "machineType", what))
    if not machine_type:
        raise MetadataError(f"{what} has no machineType")
    scheduling = doc.get("scheduling")
    spot = False
    if isinstance(scheduling, dict):
        model = _name(scheduling.get("provisioningModel")).upper()
        spot = model == "SPOT" or _name(scheduling.get("preemptible")).upper() == "TRUE"
    return Machine(
        "gcp",
        instance_type=machine_type,
        region=zone.rsplit("-", 1)[0],
        market="spot" if spot else "on-demand",
        instance_id=_optional(doc, "id"),
        source="dmi+metadata",
        shared=shared,
        zone=zone,
        project=_name(project_id),
        name=_text(doc, "name", what),
    )


def parse_alibaba(identity_document: str, *, shared: bool = False) -> Machine:
    """ECS's ``/latest/dynamic/instance-identity/document`` (instance-id, region-id, zone-id,
    instance-type: "Use instance identities", alibabacloud.com help, 2025-12-02)."""
    what = "the ECS instance identity document"
    doc = _object(identity_document, what)
    return Machine(
        "alibaba",
        instance_type=_text(doc, "instance-type", what),
        region=_text(doc, "region-id", what),
        instance_id=_text(doc, "instance-id", what),
        source="dmi+metadata",
        shared=shared,
        zone=_optional(doc, "zone-id"),
    )


def parse_lambda(instance_answer: str, *, shared: bool = False) -> Machine:
    """Lambda's Cloud API ``GET /instances/{id}``: ``{"data": {"id", "region": {"name"},
    "instance_type": {"name"}}}``."""
    what = "Lambda's instance answer"
    data = _object(instance_answer, what).get("data")
    if not isinstance(data, dict):
        raise MetadataError(f"{what} has no data")
    kind = data.get("instance_type")
    region = data.get("region")
    if not isinstance(kind, dict):
        raise MetadataError(f"{what} has no instance_type")
    return Machine(
        "lambda",
        instance_type=_text(kind, "name", what),
        region=_optional(region, "name") if isinstance(region, dict) else "",
        market="on-demand",
        instance_id=_text(data, "id", what),
        source="setting+api",
        shared=shared,
    )


def parse_azure(instance_document: str, *, shared: bool = False) -> Machine:
    """Azure IMDS ``/metadata/instance`` (its ``compute`` part)."""
    what = "the Azure instance metadata"
    compute = _object(instance_document, what).get("compute")
    if not isinstance(compute, dict):
        raise MetadataError(f"{what} has no compute")
    return Machine(
        "azure",
        instance_type=_text(compute, "vmSize", what),
        region=_optional(compute, "location"),
        market="spot" if _optional(compute, "priority").lower() == "spot" else "on-demand",
        instance_id=_optional(compute, "vmId"),
        source="dmi+metadata",
        shared=shared,
        name=_text(compute, "name", what),
        resource_group=_text(compute, "resourceGroupName", what),
        subscription_id=_text(compute, "subscriptionId", what),
    )


# -- what still bills once the provider stopped the machine (translated where shown) -------
#: AWS, GCP, Azure, RunPod: a stopped instance keeps its disks, which bill
STILL_DISKS = N_("its disks still bill")
#: ECS StopInstance with StoppedMode=StopCharging ("economical mode"): vCPUs, memory and
#: GPUs stop billing; disks, images, snapshots and a public IP or EIP go on; an instance
#: that does not qualify (subscription, not in a VPC, local disks) is billed as before
STILL_ALIBABA_STOP_CHARGING = N_(
    "its disks and public IP still bill, and the whole instance where Alibaba Cloud's "
    "economical mode (StopCharging) does not apply to it"
)
#: ECS StopInstance with StoppedMode=KeepCharging: the instance bills as if it ran
STILL_ALIBABA_KEEP_CHARGING = N_(
    "the whole instance still bills: it was stopped in KeepCharging mode"
)
#: Vast.ai: a stopped instance bills its disk ("Disk charges continue; no GPU charges")
STILL_VAST = N_("its disk still bills while the instance is stopped")
#: Lambda: terminate ends the instance's billing; persistent filesystems are billed apart
STILL_LAMBDA = N_(
    "the instance no longer bills (terminated: its local disk is erased); persistent "
    "filesystems still bill"
)
#: EC2 TerminateInstances: the instance ends; its instance-store data and the EBS volumes
#: with DeleteOnTermination are deleted, other volumes and snapshots go on billing
STILL_AWS_TERMINATED = N_(
    "the instance no longer bills (terminated: its instance-store data and the EBS volumes "
    "set to DeleteOnTermination are deleted); other volumes and snapshots still bill"
)
#: an AWS one-time Spot Instance (StopInstances answers UnsupportedOperation)
CANNOT_STOP_ONE_TIME_SPOT = N_(
    "this machine cannot be stopped: it is a one-time Spot Instance (AWS stops only Spot "
    "Instances of persistent requests); it bills until it is terminated"
)
#: AutoDL: a powered-off instance is not billed for its GPUs; storage kept is
STILL_AUTODL = N_("storage it keeps (file storage, an expanded data disk) may still bill")


#: a detected machine's label, translated where it is shown
DETECTED = N_("{machine} (detected)")
#: why it is known from DMI only (``machine.note``: the metadata service's failure)
NOTE_DMI_ONLY = N_(
    "known from its DMI fields only: its metadata service did not answer as documented ({reason})"
)


def describe(machine: Machine, translate: Callable[[str], str] = str) -> str:
    """``g5.xlarge, spot, us-east-1 (detected)``, in the language of ``translate``."""
    parts = [machine.instance_type or machine.provider, machine.market, machine.region]
    return translate(DETECTED).format(machine=", ".join(p for p in parts if p))


def note_text(machine: Machine, translate: Callable[[str], str] = str) -> str | None:
    """Why the machine is known from DMI only, in the language of ``translate`` (the
    metadata service's own answer is quoted as it came); ``None``: nothing to say."""
    if not machine.note:
        return None
    return translate(NOTE_DMI_ONLY).format(reason=machine.note)
