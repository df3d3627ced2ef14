"""A GKE hub's GPUs on N1 nodes (T4, V100, P100, P4 attached to an N1 VM), priced as GCP
bills the node: each GPU at its accelerator's rate plus the VM, shared the way the hub
shares a whole instance (the pod's GPUs over the node's, the node's taken to be the
pod's: the whole VM for a pod with whole GPUs, 1/N of it for a GPU time-sliced N ways)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.hub.profiles.gpus import Prices, rate_of
from jupyter_gpucost.hub.profiles.settings import derived_prices

MICRO = Decimal("0.000001")


def gcp(market: str = "on-demand", **overrides: str) -> Prices:
    policy = PricePolicy(
        catalog=load_catalog(),
        provider="gcp",
        market=market,
        region="us-central1",
        overrides={k: Decimal(v) for k, v in overrides.items()},
    )
    return derived_prices(policy, {"nvidia.com/gpu.shared": 4})


def pod(
    machine_type: str, accelerator: str, gpus: int, resource: str = "nvidia.com/gpu"
) -> dict[str, object]:
    return {
        "node_selector": {
            "node.kubernetes.io/instance-type": machine_type,
            "cloud.google.com/gke-accelerator": accelerator,
        },
        "extra_resource_limits": {resource: str(gpus)},
    }


def test_a_t4_on_an_n1_standard_8_pays_the_t4_and_the_vm() -> None:
    rate = rate_of(pod("n1-standard-8", "nvidia-tesla-t4", 1), gcp())
    assert (rate.allocation.model, rate.allocation.count) == ("T4", 1)
    assert rate.usd_per_hour == Decimal("0.729998")
    assert "the VM n1-standard-8" in rate.source
    assert "gcp on-demand us-central1, as of 2026-07-30" in rate.source
    assert "the most its share can be" in rate.source


def test_two_t4s_on_an_n1_standard_16_pay_both_and_the_vm_once() -> None:
    rate = rate_of(pod("n1-standard-16", "nvidia-tesla-t4", 2), gcp())
    assert rate.allocation.count == 2
    assert rate.usd_per_hour == Decimal("0.759996") + 2 * Decimal("0.35")


def test_a_v100_p100_and_p4_on_n1_nodes_are_priced_at_their_own_rates() -> None:
    for accelerator, model, gpu in [
        ("nvidia-tesla-v100", "V100", "2.48"),
        ("nvidia-tesla-p100", "P100", "1.46"),
        ("nvidia-tesla-p4", "P4", "0.6"),
    ]:
        rate = rate_of(pod("n1-highmem-8", accelerator, 1), gcp())
        assert rate.allocation.model == model
        assert rate.usd_per_hour == Decimal(gpu) + Decimal("0.473212")


def test_a_spot_node_pool_pays_the_spot_vm_and_the_spot_t4() -> None:
    rate = rate_of(pod("n1-standard-8", "nvidia-tesla-t4", 1), gcp("spot"))
    assert rate.usd_per_hour == Decimal("0.175") + Decimal("0.13402")


def test_a_time_sliced_t4_pays_a_quarter_of_the_t4_and_of_the_vm() -> None:
    rate = rate_of(pod("n1-standard-8", "nvidia-tesla-t4", 1, "nvidia.com/gpu.shared"), gcp())
    # each rounded up to the micro-dollar, never below its share
    assert rate.usd_per_hour == Decimal("0.0875") + Decimal("0.095")


def test_the_admins_t4_price_beats_the_rows_as_for_a_whole_instance() -> None:
    rate = rate_of(pod("n1-standard-8", "nvidia-tesla-t4", 1), gcp(T4="0.5"))
    assert rate.usd_per_hour == Decimal("0.5")
    assert "the VM" not in rate.source


#: read once: the catalog is parsed on each call (every region's rows), not per example
ON_DEMAND = gcp()


@given(gpus=st.integers(min_value=1, max_value=4))
def test_the_pod_pays_its_gpus_and_the_whole_vm_to_the_micro_dollar(gpus: int) -> None:
    rate = rate_of(pod("n1-standard-32", "nvidia-tesla-t4", gpus), ON_DEMAND)
    exact = Decimal("1.519992") + gpus * Decimal("0.35")
    # rounded up per GPU: never below the bill, at most a micro-dollar per GPU above it
    assert exact <= rate.usd_per_hour < exact + gpus * MICRO


def test_an_n1_type_without_a_row_is_named_and_only_its_gpus_counted() -> None:
    """n1-highcpu prices are finer than a micro-dollar: no [[vm]] row, said on the line."""
    rate = rate_of(pod("n1-highcpu-8", "nvidia-tesla-t4", 1), gcp())
    assert rate.usd_per_hour == Decimal("0.35")
    assert "node.kubernetes.io/instance-type=n1-highcpu-8" in rate.source
    assert "no price for this machine type in the catalog, only its GPUs are counted" in rate.source
