"""GCP's N1 VMs with attached GPUs (T4, V100, P100, P4), priced as GCP bills them: the VM's
machine type plus each GPU at its accelerator's rate, for the region and market.

A real server on a GCE metadata stand-in (the documented ``instance/?recursive=true``
shape) with replayed NVML traces: the user sees the VM's price and each GPU's, labelled
with the region and date, and a rate that is their sum.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, StandIn, serve, write_dmi
from hypothesis import given
from hypothesis import strategies as st
from test_upper_bound_server import write_trace

from jupyter_gpucost.core.attached_gpus import (
    attached_total,
    find_vm,
    load_vm_rows,
    vm_pricing,
)
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.core.instance_prices import (
    AdminPrices,
    find_instance,
    load_instance_rows,
    plan_prices,
)

CATALOG = load_catalog()
VMS = load_vm_rows()
#: GCP's accelerator types for N1 VMs, the NVML names of their GPUs, and their model
ACCELERATORS = {
    "nvidia-tesla-t4": ("Tesla T4", 15, "T4"),
    "nvidia-tesla-v100": ("Tesla V100-SXM2-16GB", 16, "V100"),
    "nvidia-tesla-p100": ("Tesla P100-PCIE-16GB", 16, "P100"),
    "nvidia-tesla-p4": ("Tesla P4", 8, "P4"),
}


def plan(machine_type: str, market: str = "on-demand", *, shared: bool = False) -> Any:
    return plan_prices(
        AdminPrices(),
        provider="gcp",
        instance_type=machine_type,
        market=market,
        shared=shared,
        providers=CATALOG.providers,
        rows=load_instance_rows(),
        vms=VMS,
        region="us-central1",
    )


# -- the catalog -----------------------------------------------------------------------


def test_every_n1_accelerator_has_a_dated_sourced_row_per_market() -> None:
    for accelerator, (name, memory, model) in ACCELERATORS.items():
        for market in ("on-demand", "spot"):
            row = CATALOG.find(provider="gcp", market=market, model=model, region="us-central1")
            assert row is not None, (model, market)
            assert row.instance == accelerator
            assert row.region == "us-central1"
            assert row.as_of
            assert row.source
            assert row.confidence == "third-party"
            assert row.per_gpu_hour > 0
            policy = PricePolicy(
                catalog=CATALOG, provider="gcp", market=market, region="us-central1"
            )
            price = policy.price_for(name, memory * 2**30)
            assert price is not None, name
            assert not price.upper_bound, name
            assert price.per_gpu_hour == row.per_gpu_hour


def test_every_n1_machine_type_row_is_dated_sourced_and_cheaper_on_spot() -> None:
    types = {r.machine_type for r in VMS}
    assert {"n1-standard-4", "n1-standard-8", "n1-standard-16", "n1-highmem-8"} <= types
    # every region that has a machine type's row has both markets' rows of it
    for machine_type, region in {(r.machine_type, r.region) for r in VMS}:
        on_demand = find_vm(
            VMS, provider="gcp", machine_type=machine_type, market="on-demand", region=region
        )
        spot = find_vm(VMS, provider="gcp", machine_type=machine_type, market="spot", region=region)
        assert on_demand is not None, machine_type
        assert spot is not None, machine_type
        assert 0 < spot.per_hour < on_demand.per_hour
        for row in (on_demand, spot):
            assert row.region == region
            assert row.as_of
            assert row.source
    assert {"n1-standard-4", "n1-standard-8", "n1-highmem-8"} <= {
        r.machine_type for r in VMS if r.region == "us-central1"
    }


def test_an_n1_vm_is_no_longer_assumed_to_carry_one_t4() -> None:
    """The name of an N1 VM does not say its GPUs: no whole-instance row guesses them."""
    rows = load_instance_rows()
    for machine_type in {r.machine_type for r in VMS}:
        assert (
            find_instance(rows, provider="gcp", instance=machine_type, market="on-demand") is None
        )


# -- the plan ----------------------------------------------------------------------------


def test_a_detected_n1_standard_8_is_priced_vm_plus_each_gpu() -> None:
    found = plan("n1-standard-8")
    assert found.whole is None
    assert found.vm is not None
    assert not found.note
    assert found.base_per_hour(Decimal(7)) == Decimal("0.379998")
    assert "us-central1" in found.vm.source
    assert "as of 2026-07-30" in found.vm.source
    t4 = CATALOG.find(provider="gcp", market="on-demand", model="T4", region="us-central1")
    assert t4 is not None
    assert attached_total(found.vm, [t4.per_gpu_hour]) == Decimal("0.729998")
    assert attached_total(found.vm, [t4.per_gpu_hour] * 2) == Decimal("1.079998")


def test_a_spot_n1_vm_is_priced_at_its_spot_row() -> None:
    found = plan("n1-standard-8", "spot")
    assert found.vm is not None
    assert not found.vm.upper_bound
    assert found.base_per_hour(Decimal(0)) == Decimal("0.13402")


def test_a_spot_vm_without_a_spot_row_is_priced_at_on_demand_labelled() -> None:
    on_demand = [r for r in VMS if r.market == "on-demand"]
    found = plan_prices(
        AdminPrices(),
        provider="gcp",
        instance_type="n1-standard-8",
        market="spot",
        shared=False,
        providers=CATALOG.providers,
        rows=(),
        vms=tuple(on_demand),
        region="us-central1",
    )
    assert found.vm is not None
    assert found.vm.upper_bound
    assert found.vm.source.startswith("upper bound: ")
    assert "n1-standard-8" in found.note
    assert "the most it can cost" in found.note


def test_a_vm_without_a_row_is_named_and_its_gpus_priced_one_by_one() -> None:
    found = plan("n1-ultramem-40")
    assert found.vm is None
    assert found.whole is None
    assert found.note == "no whole-instance price for n1-ultramem-40 on-demand: per-GPU prices"
    assert found.base_per_hour(Decimal(0)) == 0


def test_a_pod_on_gke_is_priced_per_gpu_at_gcps_rate() -> None:
    found = plan("n1-standard-8", shared=True)
    assert found.vm is None
    assert found.whole is None
    policy = PricePolicy(
        catalog=CATALOG, provider=found.provider, market=found.market, region=found.region
    )
    price = policy.price_for("Tesla T4", 15 * 2**30)
    assert price is not None
    assert price.per_gpu_hour == Decimal("0.35")
    assert (price.provider, price.region) == ("gcp", "us-central1")


@given(
    machine_type=st.sampled_from(sorted({r.machine_type for r in VMS})),
    market=st.sampled_from(["on-demand", "spot"]),
    accelerator=st.sampled_from(sorted(ACCELERATORS)),
    count=st.integers(min_value=0, max_value=8),
)
def test_the_bill_is_the_vm_plus_count_times_the_gpu(
    machine_type: str, market: str, accelerator: str, count: int
) -> None:
    vm = vm_pricing(
        VMS, provider="gcp", machine_type=machine_type, market=market, region="us-central1"
    )
    assert vm is not None
    name, memory, _ = ACCELERATORS[accelerator]
    policy = PricePolicy(catalog=CATALOG, provider="gcp", market=market, region="us-central1")
    price = policy.price_for(name, memory * 2**30)
    assert price is not None
    total = attached_total(vm, [price.per_gpu_hour] * count)
    assert total == vm.row.per_hour + count * price.per_gpu_hour
    assert total >= vm.row.per_hour > 0


# -- a real server on a GCE stand-in -------------------------------------------------------


async def status(jp_fetch: Any) -> dict[str, Any]:
    return dict(json.loads((await jp_fetch("gpucost", "api", "status")).body))


class _OnGce:
    machine_type = "n1-standard-8"
    spot = False
    gpus = 1

    @pytest.fixture
    def standin(self) -> Iterator[StandIn]:
        cloud = Cloud()
        cloud.gce_instance["machineType"] = (
            f"projects/123456789012/machineTypes/{self.machine_type}"
        )
        if not self.spot:
            cloud.gce_instance["scheduling"] = {
                "automaticRestart": "TRUE",
                "onHostMaintenance": "TERMINATE",
                "preemptible": "FALSE",
                "provisioningModel": "STANDARD",
            }
        yield from serve(cloud)

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("GCE_METADATA_HOST", standin.host)
        trace = write_trace(tmp_path / "trace", "Tesla T4", 15, gpus=self.gpus)
        return {
            "telemetry": "simulated",
            "simulated_trace": trace,
            "sample_interval_s": 0.2,
            "ledger_url": "none",
            "dmi_path": write_dmi(tmp_path / "dmi", "gcp"),
            "gcp_compute_url": standin.url,
        }


class TestAnN1Standard8WithOneT4(_OnGce):
    async def test_the_vm_and_the_t4_are_priced_apart_labelled_and_summed(
        self, jp_fetch: Any
    ) -> None:
        doc = await status(jp_fetch)
        machine = doc["machine"]
        assert (machine["provider"], machine["instance_type"]) == ("gcp", "n1-standard-8")
        assert machine["priced"] == "instance"
        assert machine["instance_price_usd_per_hour"] == 0.379998
        assert machine["instance_price_region"] == "us-central1"
        assert machine["instance_price_market"] == "on-demand"
        assert machine["instance_price_as_of"] == "2026-07-30"
        assert "each attached GPU at its own rate" in machine["instance_price_source"]
        assert machine["price_note"] is None
        [gpu] = doc["gpus"]
        assert gpu["model"] == "T4"
        assert gpu["price_usd_per_hour"] == 0.35
        assert (gpu["price_provider"], gpu["price_region"]) == ("gcp", "us-central1")
        assert gpu["price_basis"] == "catalog"
        assert gpu["price_as_of"]
        assert doc["rate_usd_per_hour"] == pytest.approx(0.729998, abs=1e-6)


class TestAnN1Standard8WithTwoT4s(_OnGce):
    gpus = 2

    async def test_billed_the_vm_plus_two_t4s(self, jp_fetch: Any) -> None:
        doc = await status(jp_fetch)
        assert [g["price_usd_per_hour"] for g in doc["gpus"]] == [0.35, 0.35]
        assert doc["rate_usd_per_hour"] == pytest.approx(1.079998, abs=1e-6)
        assert "instance-gpus" not in [w["code"] for w in doc["warnings"]]


class TestASpotN1Standard8WithOneT4(_OnGce):
    spot = True

    async def test_billed_the_spot_vm_plus_the_spot_t4(self, jp_fetch: Any) -> None:
        doc = await status(jp_fetch)
        assert doc["machine"]["market"] == "spot"
        assert doc["machine"]["instance_price_usd_per_hour"] == 0.13402
        assert doc["machine"]["instance_price_basis"] == "catalog"
        assert doc["gpus"][0]["price_usd_per_hour"] == 0.175
        assert doc["rate_usd_per_hour"] == pytest.approx(0.30902, abs=1e-6)


class TestAnN1WithoutAVmRow(_OnGce):
    machine_type = "n1-ultramem-40"

    async def test_the_vm_is_named_unpriced_and_the_t4_still_priced(self, jp_fetch: Any) -> None:
        doc = await status(jp_fetch)
        assert doc["machine"]["priced"] == "gpu"
        assert "n1-ultramem-40" in doc["machine"]["price_note"]
        assert "instance-unpriced" in [w["code"] for w in doc["warnings"]]
        assert doc["gpus"][0]["price_usd_per_hour"] == 0.35
