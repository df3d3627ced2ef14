"""How a profile list is read (as KubeSpawner reads it) and how a pod's GPU settings are
priced: slugs, defaults, merging, node labels, whole instances, what cannot be priced."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.hub.model import GpuAllocation, HubConfigError
from jupyter_gpucost.hub.profiles import source as profile_source
from jupyter_gpucost.hub.profiles.gpus import rate_of
from jupyter_gpucost.hub.profiles.kubespawner import initialized, load, slugify
from jupyter_gpucost.hub.profiles.node_terms import Unpriced
from jupyter_gpucost.hub.profiles.settings import derived_prices
from jupyter_gpucost.hub.profiles.table import ProfileSource, ProfileTable


def gcp() -> PricePolicy:
    return PricePolicy(
        catalog=load_catalog(),
        provider="gcp",
        overrides={"T4": Decimal("0.35"), "A100-80GB": Decimal("5.07")},
        region="us-central1",
    )


def test_slugs_defaults_and_merging_follow_kubespawner() -> None:
    assert slugify("T4 GPU (16 GB)") == "t4-gpu-16-gb"
    assert slugify("Élodie's  GPU!") == "elodies-gpu"
    # a dict of profiles is its values sorted by key; no default: the first is
    profiles = initialized(
        {
            "b": {"display_name": "B", "kubespawner_override": {"node_selector": {"x": "1"}}},
            "a": {"display_name": "A"},
        }
    )
    assert [p["slug"] for p in profiles] == ["a", "b"]
    assert profiles[0]["default"] is True
    base = {"node_selector": {"pool": "user", "x": "0"}}
    selection, state = load({"profile": "b"}, profiles, base)
    assert selection.slug == "b"
    assert state["node_selector"] == {"pool": "user", "x": "1"}
    # {} is the default profile; the spawner's own settings stay
    selection, state = load({}, profiles, base)
    assert (selection.slug, state["node_selector"]) == ("a", {"pool": "user", "x": "0"})


def test_a_choice_overrides_the_profile_recursively_and_none_removes_a_key() -> None:
    profiles = initialized(
        [
            {
                "display_name": "GPU",
                "kubespawner_override": {
                    "extra_resource_limits": {"nvidia.com/gpu": "1"},
                    "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
                },
                "profile_options": {
                    "size": {
                        "display_name": "Size",
                        "choices": {
                            "one": {"display_name": "1"},
                            "four": {
                                "display_name": "4",
                                "kubespawner_override": {
                                    "extra_resource_limits": {"nvidia.com/gpu": "4"}
                                },
                            },
                            "cpu": {
                                "display_name": "no GPU",
                                "kubespawner_override": {
                                    "extra_resource_limits": {"nvidia.com/gpu": None},
                                    "node_selector": {"cloud.google.com/gke-accelerator": None},
                                },
                            },
                        },
                    }
                },
            }
        ]
    )
    prices = derived_prices(gcp())
    rates = {}
    for choice in ("one", "four", "cpu"):
        _, state = load({"profile": "gpu", "size": choice}, profiles, {})
        rates[choice] = rate_of(state, prices)
    assert [(r.allocation.count, r.usd_per_hour) for r in rates.values()] == [
        (1, Decimal("0.70683")),
        (4, Decimal("2.82732")),
        (0, Decimal(0)),
    ]
    # the first choice is the default when none says so
    _, state = load({}, profiles, {})
    assert rate_of(state, prices).allocation.count == 1


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (
            {
                "extra_resource_limits": {"nvidia.com/gpu": "1"},
                "node_selector": {
                    "cloud.google.com/gke-accelerator": "nvidia-tesla-t4",
                    "node.kubernetes.io/instance-type": "g2-standard-4",
                },
            },
            "node_selector node.kubernetes.io/instance-type=g2-standard-4 has L4 GPUs, but "
            "node_selector cloud.google.com/gke-accelerator=nvidia-tesla-t4 names T4",
        ),
        (
            {
                "extra_resource_limits": {"nvidia.com/gpu": "2"},
                "node_selector": {"node.kubernetes.io/instance-type": "g2-standard-4"},
            },
            "extra_resource_limits nvidia.com/gpu asks 2 GPUs of g2-standard-4, which has 1",
        ),
        (
            {"node_selector": {"karpenter.k8s.aws/instance-gpu-name": "a100"}},
            "karpenter.k8s.aws/instance-gpu-name='a100' is 40 or 80 GB",
        ),
        (
            {"extra_resource_limits": {"nvidia.com/gpu": "1.5"}},
            "'1.5' is not a whole number of GPUs",
        ),
    ],
)
def test_what_cannot_be_priced_says_why(state: dict[str, object], reason: str) -> None:
    with pytest.raises(Unpriced, match=None) as e:
        rate_of(state, derived_prices(gcp()))
    assert reason in str(e.value)


def test_several_possible_nodes_bill_the_dearest() -> None:
    state: dict[str, object] = {
        "extra_resource_limits": {"nvidia.com/gpu": "1"},
        "node_affinity_required": [
            {
                "matchExpressions": [
                    {
                        "key": "cloud.google.com/gke-accelerator",
                        "operator": "In",
                        "values": ["nvidia-l4", "nvidia-h100-80gb"],
                    }
                ]
            }
        ],
    }
    rate = rate_of(state, derived_prices(gcp()))
    assert (rate.allocation.model, rate.usd_per_hour) == ("H100-80GB", Decimal("11.06125"))
    assert rate.source.startswith("the dearest of L4, H100-80GB (the pod may land on any)")


def test_reading_a_values_yaml_takes_hub_config_last_and_refuses_extra_config(
    tmp_path: Path,
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        "singleuser:\n"
        "  nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}\n"
        "  extraResource: {limits: {nvidia.com/gpu: 1}}\n"
        "  profileList: [{display_name: ignored}]\n"
        "hub:\n  config:\n    KubeSpawner:\n      profile_list: [{display_name: Wins}]\n"
    )
    source = profile_source.read(str(values))
    assert source.profiles == [{"display_name": "Wins"}]
    assert source.base == {
        "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
        "extra_resource_limits": {"nvidia.com/gpu": 1},
    }
    values.write_text(
        values.read_text()
        + "  extraConfig:\n    gpus: |\n      c.KubeSpawner.profile_list = make()\n"
    )
    assert str(profile_source.read(str(values)).profiles) == (
        "<set in Python by hub.extraConfig.gpus>"
    )
    with pytest.raises(HubConfigError, match=r"profiles_from = '.*nope.json': use a Zero"):
        profile_source.read(str(tmp_path / "nope.json"))


def test_an_instance_type_typed_by_a_user_must_have_a_price() -> None:
    """A node pool the catalog has no row for is "no GPU" when the admin names it (a CPU
    pool, said in the source), but a user's text naming one is billed the dearest: it
    could be a GPU node."""
    source = ProfileSource(
        "test",
        [
            {
                "display_name": "Pick a node",
                "kubespawner_override": {
                    "node_selector": {"node.kubernetes.io/instance-type": "r5.xlarge"}
                },
                "profile_options": {
                    "node": {
                        "display_name": "Node",
                        "choices": {"cpu": {"display_name": "CPU"}},
                        "unlisted_choice": {
                            "enabled": True,
                            "kubespawner_override": {
                                "node_selector": {"node.kubernetes.io/instance-type": "{value}"}
                            },
                        },
                    }
                },
            }
        ],
        {},
    )
    policy = PricePolicy(catalog=load_catalog(), region="us-east-1")
    table = ProfileTable(source, derived_prices(policy), {})
    assert table.problems == []
    cpu = table.rate_for({})
    assert (cpu.allocation.count, cpu.usd_per_hour) == (0, 0)
    assert cpu.source == (
        "no GPU (no nvidia.com/gpu limit, no GPU node label; node_selector "
        "node.kubernetes.io/instance-type=r5.xlarge has no whole-instance row (aws on-demand))"
    )
    typed = {"profile": "pick-a-node", "node--unlisted-choice": "g5.12xlarge"}
    whole = table.rate_for(typed)
    assert (whole.allocation, whole.usd_per_hour) == (
        GpuAllocation("A10G", 4),
        Decimal("5.672"),
    )
    # the dearest AWS instance the catalog prices whole, in any region (sa-east-1's
    # p5.48xlarge, 8 × H100): a typed type may have no row in the hub's region
    unknown = table.rate_for({**typed, "node--unlisted-choice": "g7e.2xlarge"})
    assert (unknown.allocation, unknown.usd_per_hour) == (
        GpuAllocation("H100-80GB", 8),
        Decimal("92.4672"),
    )
    assert "has no whole-instance price" in unknown.source
    assert unknown.source.endswith(
        "billed at the dearest rate (the dearest instance priced at aws on-demand: "
        "p5.48xlarge in sa-east-1, 92.4672 USD/h)"
    )
