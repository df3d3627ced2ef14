"""A node's ``providerID`` as the cloud's bill names its instance (pure).

Kubernetes' cloud controllers write ``spec.providerID`` as:

* AWS: ``aws:///us-east-1a/i-0abc…`` (the zone, then the EC2 instance id): the bill's
  ``ResourceId`` is the instance id (or its ARN);
* GCE: ``gce://PROJECT/ZONE/NAME``: the bill's ``ResourceId`` is
  ``//compute.googleapis.com/projects/PROJECT/zones/ZONE/instances/NAME``;
* Azure: ``azure:///subscriptions/SUB/resourceGroups/RG/providers/Microsoft.Compute/
  virtualMachines/NAME``: the bill's ``ResourceId`` is that resource id (in lower case).

An AKS node of a virtual machine scale set (``azure:///subscriptions/SUB/resourceGroups/
RG/providers/Microsoft.Compute/virtualMachineScaleSets/SET/virtualMachines/0``) is billed
as the whole scale set (``ResourceId`` ``…/virtualMachineScaleSets/SET``, the resource
group often in lower case): every node of the set is matched to the set's rows
(:attr:`~...core.focus.BilledMachine.scale_set`), which :mod:`.allocate` shares by the
instance-hours the row says.
"""

from __future__ import annotations

import re

from ...core.focus import BilledMachine

_AWS = re.compile(r"aws://[^/]*/(?P<zone>[^/]*)/(?P<id>i-[0-9a-fA-F]+)$")
_GCE = re.compile(r"gce://(?P<project>[^/]+)/(?P<zone>[^/]+)/(?P<name>[^/]+)$")
_AZURE = re.compile(
    r"azure://(?P<rid>/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)"
    r"/providers/Microsoft\.Compute/virtualMachines/(?P<name>[^/]+))$",
    re.IGNORECASE,
)
_AZURE_SET = re.compile(
    r"azure:///subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)"
    r"/providers/Microsoft\.Compute/virtualMachineScaleSets/(?P<name>[^/]+)"
    r"/virtualMachines/[^/]+$",
    re.IGNORECASE,
)


def _region(zone: str, provider: str) -> str:
    if provider == "aws":
        return zone[:-1] if zone and zone[-1].isalpha() else zone
    return zone.rsplit("-", 1)[0] if zone.count("-") >= 2 else zone


def billed_machine(provider_id: str) -> BilledMachine | None:
    """What the bill names the node by (``None``: a ``providerID`` no bill row names)."""
    text = provider_id.strip()
    if m := _AWS.match(text):
        return BilledMachine(provider="aws", instance_id=m["id"], region=_region(m["zone"], "aws"))
    if m := _GCE.match(text):
        return BilledMachine(
            provider="gcp",
            project=m["project"],
            name=m["name"],
            region=_region(m["zone"], "gcp"),
        )
    if m := _AZURE.match(text):
        return BilledMachine(
            provider="azure",
            name=m["name"],
            resource_group=m["rg"],
            subscription_id=m["sub"],
        )
    if m := _AZURE_SET.match(text):
        return BilledMachine(
            provider="azure",
            name=m["name"],
            resource_group=m["rg"],
            subscription_id=m["sub"],
            scale_set=True,
        )
    return None


def instance_id(provider_id: str) -> str:
    """The cloud's instance the ``providerID`` names (``i-0abc…``; GCE's and Azure's
    resource names), or ``""``."""
    machine = billed_machine(provider_id)
    return machine.key if machine is not None else ""
