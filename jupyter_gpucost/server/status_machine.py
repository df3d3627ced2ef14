"""The ``machine`` object of ``GET /gpucost/api/status`` and its warnings: the detected
machine in the server's language, how it is priced, and what it cannot do (a machine
that cannot be stopped bills until terminated)."""

from __future__ import annotations

from ..core.attached_gpus import VmPricing
from ..core.billed_rate import plan_label
from ..core.catalog import BASIS_CATALOG, BASIS_UPPER_BOUND
from ..core.i18n import _, ngettext
from ..core.instance_prices import InstancePricing, PricePlan
from ..core.machine import Machine, describe, note_text
from ..core.meter import MeterSnapshot
from ..core.wire import JsonObject, StatusWarning


def machine_json(
    machine: Machine | None, plan: PricePlan | None, snapshot: MeterSnapshot
) -> tuple[JsonObject | None, list[StatusWarning]]:
    """The ``machine`` object (``None``: none detected) and its warnings."""
    if machine is None:
        return None, []
    whole = None if plan is None else plan.whole
    vm = None if plan is None else plan.vm
    cannot_stop = _(machine.cannot_stop) if machine.cannot_stop else None
    doc: JsonObject = {
        **machine.to_json(),
        # in the server's language: the detection's own words are constants of the catalog
        "note": note_text(machine, _),
        "cannot_stop": cannot_stop,
        "label": describe(machine, _),
        # an N1 VM with attached GPUs: the VM priced from its row, each GPU from its own
        "priced": "instance" if whole is not None or vm is not None else "gpu",
        "price_note": None if plan is None or not plan.note_msgid else plan.note_in(_),
        **(_vm_price(vm) if vm is not None else _whole_price(whole)),
        # "billed rate from Vast.ai, read 14:02 UTC" where the provider told the rate
        "instance_price_label": plan_label(plan, _),
    }
    warnings: list[StatusWarning] = []
    if cannot_stop:
        # it bills until terminated: the ⚠ in the status bar and a banner in the panel
        warnings.append({"code": "machine-cannot-stop", "message": cannot_stop})
    if whole is not None:
        seen = sum(1 for g in snapshot.gpus if g.model == whole.row.gpu_model)
        if seen != whole.row.gpus:
            warnings.append(
                {
                    "code": "instance-gpus",
                    "message": ngettext(
                        "A {instance} has {gpus} {model} GPU; {seen} are visible here, so "
                        "{seen} of its {gpus} shares of the instance price are counted.",
                        "A {instance} has {gpus} {model} GPUs; {seen} are visible here, so "
                        "{seen} of its {gpus} shares of the instance price are counted.",
                        whole.row.gpus,
                    ).format(
                        instance=whole.row.instance,
                        gpus=whole.row.gpus,
                        model=whole.row.gpu_model,
                        seen=seen,
                    ),
                }
            )
    elif plan is not None and plan.note_msgid:
        message = _("Machine: {note}.").format(note=plan.note_in(_))
        warnings.append({"code": "instance-unpriced", "message": message})
    return doc, warnings


def _whole_price(whole: InstancePricing | None) -> JsonObject:
    """The ``instance_price_*`` fields of a machine priced whole (``None``: per GPU)."""
    price = None if whole is None else float(whole.row.per_hour)
    return {
        "instance_price_per_hour": price,
        "instance_price_usd_per_hour": price,  # deprecated twin (docs/api.md, "Money keys")
        "instance_price_source": None if whole is None else whole.per_gpu.source,
        "instance_price_confidence": None if whole is None else whole.row.confidence,
        "instance_price_basis": None if whole is None else whole.per_gpu.basis,
        "instance_price_as_of": None if whole is None else whole.row.as_of,
        "instance_price_region": None if whole is None else (whole.row.region or None),
        "instance_price_market": None if whole is None else (whole.row.market or None),
    }


def _vm_price(vm: VmPricing) -> JsonObject:
    """The ``instance_price_*`` fields of a VM whose GPUs are priced one by one: the VM's
    own row (its GPUs are in ``gpus``)."""
    return {
        "instance_price_per_hour": float(vm.per_hour),
        "instance_price_usd_per_hour": float(vm.per_hour),  # deprecated twin
        "instance_price_source": vm.source,
        "instance_price_confidence": vm.row.confidence,
        "instance_price_basis": BASIS_UPPER_BOUND if vm.upper_bound else BASIS_CATALOG,
        "instance_price_as_of": vm.row.as_of,
        "instance_price_region": vm.row.region or None,
        "instance_price_market": vm.row.market,
    }
