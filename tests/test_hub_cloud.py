"""The hub knows its own cloud: ``c.GpuCostHub.price_provider`` unset is read from the
profile list (node labels, machine types), a provider the profiles contradict is refused
by name, and nothing names a cloud: the service asks rather than assume AWS.

Real configs: LEAP's GKE daskhub (2i2c-org/infrastructure, ``leap/daskhub-common``) and
2i2c's EKS neurohackademy hub, both in tests/data/real_configs; the AKS profile uses the
labels AKS documents as its own (``kubernetes.azure.com/agentpool``, the VM size in
``node.kubernetes.io/instance-type``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hub_profiles import row, run_check

from jupyter_gpucost.core.instance_prices import load_instance_rows
from jupyter_gpucost.hub.model import HubConfigError
from jupyter_gpucost.hub.profiles.cloud import Signal, decide, instance_provider

REAL = Path(__file__).parent / "data" / "real_configs"
LEAP = REAL / "leap-daskhub-common.values.yaml"
NEUROHACKADEMY = REAL / "2i2c-neurohackademy.values.yaml"
AI_ON_GKE = REAL / "ai-on-gke-jupyter.values.yaml"
ROWS = load_instance_rows()
PROVIDERS = ("aws", "gcp", "azure", "lambda", "runpod", "autodl", "alibaba")

AKS = """
singleuser:
  profileList:
    - display_name: "A100 (AKS)"
      slug: a100
      kubespawner_override:
        node_selector:
          kubernetes.azure.com/agentpool: gpua100
          node.kubernetes.io/instance-type: Standard_NC24ads_A100_v4
        extra_resource_limits:
          nvidia.com/gpu: "1"
"""


def config(path: Path, extra: str = "") -> str:
    return f"c.GpuCostHub.profiles_from = {str(path)!r}\n{extra}"


#: the region of these GKE hubs: GCP's GPU and N1 rows are per region
CENTRAL = "c.GpuCostHub.price_region = 'us-central1'\n"


def test_a_gke_hub_of_unknown_region_is_priced_at_the_dearest_regions_rows_labelled(
    tmp_path: Path,
) -> None:
    code, out, err = run_check(tmp_path, config(LEAP))
    assert code == 0, err
    gpu = row(out, "gpu", "image=pytorch")
    # southamerica-east1's T4 (0.48) and n1-standard-8 (0.60319): the most it can cost
    assert gpu[3] == "$1.08319/h"
    assert "upper bound" in gpu[4]
    assert "southamerica-east1" in gpu[4]


def test_leap_gke_hub_is_priced_at_gcp_its_t4_on_the_n1_vm_as_gcp_bills_it(
    tmp_path: Path,
) -> None:
    code, out, err = run_check(tmp_path, config(LEAP, CENTRAL))
    # the cloud is GCP, read from the profiles (an n2 machine type, GKE's labels)
    assert "prices of gcp: detected from the profiles: profile" in out
    assert "node.kubernetes.io/instance-type=n2-highmem-64" in out
    # the T4 on an n1-standard-8 node: GCP's T4 rate plus the N1 VM, never the AWS g4dn row
    assert code == 0, err
    assert "g4dn" not in out + err
    gpu = row(out, "gpu", "image=pytorch")
    assert gpu[2] == "1 × T4"
    assert gpu[3] == "$0.729998/h"  # 0.35 (T4, us-central1) + 0.379998 (n1-standard-8)
    assert "cloud.google.com/gke-accelerator=nvidia-tesla-t4" in gpu[4]
    assert "the VM n1-standard-8" in gpu[4]
    assert "us-central1" in gpu[4]
    # the CPU profiles are not GPU machines: no GPU, at any choice
    assert row(out, "medium-full", "requests=mem_8, image=pangeo")[2] == "no GPU"


def test_googles_gke_template_prices_its_gpus_at_gcp_and_refuses_its_tpu_by_name(
    tmp_path: Path,
) -> None:
    """GoogleCloudPlatform/ai-on-gke's JupyterHub values: GKE labels only, no machine type."""
    code, out, err = run_check(tmp_path, config(AI_ON_GKE, CENTRAL))
    assert "prices of gcp: detected from the profiles" in out
    t4 = row(out, "gpu-t4", "storage=DefaultStorage")
    assert t4[2:4] == ["2 × T4", "$0.70/h"]  # 2 × GCP's T4, us-central1
    assert "gcp on-demand us-central1 (nvidia-tesla-t4)" in t4[4]
    a100 = row(out, "gpu-a100", "storage=GCSFuse")
    assert a100[2] == "2 × A100-40GB"
    assert "gcp on-demand us-central1 (a2-highgpu-1g)" in a100[4]
    assert "g4dn" not in out + err
    assert "p4d" not in out + err
    # a TPU has no catalog price: refused by name, the service does not start
    assert code == 2
    assert "cannot price profile 'tpu' (storage=DefaultStorage)" in err
    assert "google.com/tpu" in err
    assert "profile_gpus['tpu']" in err


def test_leap_priced_with_the_admins_gcp_t4_price(tmp_path: Path) -> None:
    code, out, err = run_check(
        tmp_path, config(LEAP, CENTRAL + 'c.GpuCostHub.price_overrides = {"T4": "0.35"}\n')
    )
    assert code == 0, err
    gpu = row(out, "gpu", "image=pytorch")
    assert gpu[2:4] == ["1 × T4", "$0.35/h"]
    assert "cloud.google.com/gke-accelerator=nvidia-tesla-t4" in gpu[4]


def test_aws_prices_set_for_a_gke_hub_are_refused_by_name(tmp_path: Path) -> None:
    code, _out, err = run_check(tmp_path, config(LEAP, 'c.GpuCostHub.price_provider = "aws"\n'))
    assert code == 2
    assert "c.GpuCostHub.price_provider = 'aws', but the profile list runs on gcp" in err
    assert "set c.GpuCostHub.price_provider = 'gcp'" in err


def test_an_eks_hub_is_priced_at_aws_from_its_machine_type(tmp_path: Path) -> None:
    # the hub's region named: its rows (us-west-2's g4dn.xlarge is 0.526, as us-east-1's)
    code, out, err = run_check(
        tmp_path, config(NEUROHACKADEMY, "c.GpuCostHub.price_region = 'us-west-2'\n")
    )
    assert code == 0, err
    assert "prices of aws: detected from the profiles" in out
    gpu_lines = [line for line in out.splitlines() if "g4dn.xlarge" in line and "T4" in line]
    assert gpu_lines
    assert all("$0.526/h" in line for line in gpu_lines)


def test_an_aks_hub_is_priced_at_azure(tmp_path: Path) -> None:
    values = tmp_path / "aks.yaml"
    values.write_text(AKS)
    code, out, err = run_check(tmp_path, config(values))
    assert code == 0, err
    assert "prices of azure: detected from the profiles" in out
    a100 = row(out, "a100", "-")
    assert a100[2] == "1 × A100-80GB"
    assert "Standard_NC24ads_A100_v4" in a100[4]
    assert "azure" in a100[4]


def test_a_profile_list_naming_two_clouds_is_refused(tmp_path: Path) -> None:
    values = tmp_path / "mixed.yaml"
    values.write_text(
        AKS + "    - display_name: T4\n      slug: t4\n      kubespawner_override:\n"
        "        node_selector: {node.kubernetes.io/instance-type: g4dn.xlarge}\n"
        "        extra_resource_limits: {nvidia.com/gpu: 1}\n"
    )
    code, _out, err = run_check(tmp_path, config(values))
    assert code == 2
    assert "the profile list names machines of several clouds: aws (profile 't4'" in err
    assert "azure (profile 'a100'" in err


def test_nothing_naming_a_cloud_asks_for_the_setting(tmp_path: Path) -> None:
    values = tmp_path / "plain.yaml"
    values.write_text(
        "singleuser:\n  profileList:\n    - display_name: T4\n      slug: t4\n"
        "      kubespawner_override:\n"
        "        node_selector: {nvidia.com/gpu.product: Tesla-T4}\n"
        "        extra_resource_limits: {nvidia.com/gpu: 1}\n"
    )
    code, _out, err = run_check(tmp_path, config(values))
    assert code == 2
    assert "c.GpuCostHub.price_provider is not set and nothing in the profiles names" in err
    # once the admin says so, it is priced there
    code, out, err = run_check(tmp_path, config(values, 'c.GpuCostHub.price_provider = "aws"\n'))
    assert code == 0, err
    assert "prices of aws: c.GpuCostHub.price_provider = 'aws'" in out


def test_every_catalog_machine_type_is_its_own_providers() -> None:
    for r in ROWS:
        assert instance_provider(r.instance, ROWS) == r.provider
        # by its name alone too (a type a later catalog drops is still recognised)
        assert instance_provider(r.instance, ()) == r.provider, r.instance


@settings(deadline=None, max_examples=300)
@given(
    configured=st.sampled_from(("", *PROVIDERS)),
    found=st.lists(
        st.builds(Signal, st.sampled_from(PROVIDERS), st.text(min_size=1, max_size=20)),
        max_size=6,
    ),
)
def test_the_provider_is_never_one_the_profiles_contradict(
    configured: str, found: list[Signal]
) -> None:
    clouds = {s.provider for s in found}
    conflict = len(clouds) > 1 or bool(configured and clouds and configured not in clouds)
    if conflict or not (configured or clouds):
        # refused only for a conflict, or with nothing to go by
        with pytest.raises(HubConfigError):
            decide(configured, found, PROVIDERS)
        return
    cloud = decide(configured, found, PROVIDERS)
    assert cloud.provider in (clouds or {configured})
    if configured:
        assert cloud.provider == configured


@given(st.text(max_size=60))
def test_any_machine_type_text_is_read_without_error(text: str) -> None:
    assert instance_provider(text, ()) in (None, *PROVIDERS)


@pytest.mark.parametrize(
    ("instance", "provider"),
    [
        ("a2-highgpu-1g", "gcp"),
        ("n1-standard-8", "gcp"),
        ("g2-standard-4", "gcp"),
        ("g4dn.xlarge", "aws"),
        ("p4d.24xlarge", "aws"),
        ("Standard_NC24ads_A100_v4", "azure"),
        ("ecs.gn7i-c8g1.2xlarge", "alibaba"),
        ("gpu_1x_a10", "lambda"),
        ("my-node-pool", None),
    ],
)
def test_machine_type_names_as_each_cloud_writes_them(instance: str, provider: str) -> None:
    assert instance_provider(instance, ()) == provider
