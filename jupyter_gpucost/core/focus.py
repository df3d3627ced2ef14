"""FOCUS bills (the FinOps Open Cost and Usage Specification, 1.0–1.2): the columns a
reconciliation reads, which bill rows are a machine's, and the rules for days (pure).

The three clouds name a virtual machine differently in ``ResourceId``:

* AWS (Data Exports, FOCUS 1.0–1.2): the instance id, ``i-0abc…``; some exports write the
  instance's ARN, ``arn:aws:ec2:REGION:ACCOUNT:instance/i-0abc…``;
* Azure (Cost Management exports): the VM's resource id,
  ``/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/NAME``
  (in lower case in the exports);
* GCP (the FOCUS view of the billing export): ``//compute.googleapis.com/projects/PROJECT/
  zones/ZONE/instances/NAME`` (or the numeric id in place of the name).

A machine the ledger recorded is matched by the last part of ``ResourceId`` (case
insensitive) and then by the whole rule of its provider, so an instance of the same name
in another project or resource group is never taken for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from .machine import Machine

#: the columns a reconciliation reads; a file without one of them is not a FOCUS export
REQUIRED_COLUMNS = (
    "ResourceId",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "BillingCurrency",
)
#: what tells a charge from another for the same resource and hour: a later file's row for
#: the same charge is a revision and replaces the earlier one (1.0 has every one of them)
CHARGE_KEY_COLUMNS = ("ChargeCategory", "ChargeClass", "SkuPriceId")
#: read where a file has them: how much of its unit a charge is (a scale set's instance-hours)
QUANTITY_COLUMNS = ("ConsumedQuantity", "ConsumedUnit", "PricingUnit")

#: the clouds revise a day's charges for about this long after it
SETTLE_AFTER = timedelta(hours=48)


@dataclass(frozen=True)
class BilledMachine:
    """A machine as the ledger recorded it, with what its provider's bill names it by."""

    provider: str
    instance_id: str = ""
    instance_type: str = ""
    region: str = ""
    name: str = ""
    project: str = ""
    resource_group: str = ""
    subscription_id: str = ""
    #: Azure: ``name`` is a virtual machine scale set (an AKS node pool), billed as one
    #: resource for all its instances
    scale_set: bool = False

    @property
    def key(self) -> str:
        """The machine's one name in the reconciliation (the JSON's ``resource_id``)."""
        if self.provider == "azure" and self.name and self.resource_group:
            return azure_resource_id(
                self.subscription_id, self.resource_group, self.name, self.scale_set
            )
        if self.provider == "gcp" and self.project and self.name:
            return f"//compute.googleapis.com/projects/{self.project}/instances/{self.name}"
        return self.instance_id

    def last_parts(self) -> set[str]:
        """The last parts of ``ResourceId`` (lower case) the bill may name it by."""
        if self.provider == "azure":
            return {self.name.lower()} if self.name else set()
        if self.provider == "gcp":
            return {p.lower() for p in (self.name, self.instance_id) if p}
        return {self.instance_id.lower()} if self.instance_id else set()

    def names(self, resource_id: str) -> bool:
        """Whether a bill row's ``ResourceId`` is this machine."""
        rid = resource_id.strip().lower()
        last = rid.rsplit("/", 1)[-1]
        if not last or last not in self.last_parts():
            return False
        if self.provider == "aws":
            return rid == last or (rid.startswith("arn:aws") and rid.endswith(f"instance/{last}"))
        if self.provider == "azure":
            return rid == self.key.lower()
        if self.provider == "gcp":
            return (
                rid.startswith("//compute.googleapis.com/")
                and f"/projects/{self.project.lower()}/" in rid
                and f"/instances/{last}" in rid
            )
        return rid == last


def azure_resource_id(
    subscription_id: str, resource_group: str, name: str, scale_set: bool = False
) -> str:
    kind = "virtualMachineScaleSets" if scale_set else "virtualMachines"
    return (
        f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}"
        f"/providers/Microsoft.Compute/{kind}/{name}"
    )


def day_of(moment: datetime) -> date:
    """The bill's day (UTC) a charge starting at ``moment`` belongs to."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC).date()


def settled(day: date, newest_charge_end: datetime) -> bool:
    """Whether a day is settled: it ended at least 48 h before the bill's newest charge."""
    day_end = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    return newest_charge_end - day_end >= SETTLE_AFTER


def uncovered_s(start_s: float, end_s: float, open_spans: list[tuple[float, float]]) -> float:
    """Seconds of ``[start_s, end_s)`` that no span of ``open_spans`` covers."""
    covered = 0.0
    cursor = start_s
    for lo, hi in sorted(open_spans):
        lo, hi = max(lo, cursor), min(hi, end_s)
        if hi > lo:
            covered += hi - lo
            cursor = hi
    return max(0.0, (end_s - start_s) - covered)


def billed_machine(machine: Machine) -> BilledMachine:
    """What a detected machine's bill names it by."""
    return BilledMachine(
        provider=machine.provider,
        instance_id=machine.instance_id,
        instance_type=machine.instance_type,
        region=machine.region,
        name=machine.name,
        project=machine.project,
        resource_group=machine.resource_group,
        subscription_id=machine.subscription_id,
    )
