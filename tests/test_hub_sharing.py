"""A GPU shared by several pods is billed its share wherever the model comes from: a
fraction the admin names (``"RTX-5090 x 1/8"``), or ``c.GpuCostHub.gpu_sharing`` for a
profile whose model ``profile_gpus`` names (a time-sliced node pool with no model label,
the case where check-profiles sends the admin to ``profile_gpus``)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hub_profiles import row, run_check

from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.hub.allocation import AllocationPolicy, describe, parse_allocation
from jupyter_gpucost.hub.model import HubConfigError, ServerInfo
from jupyter_gpucost.hub.profiles.settings import ProfileSettings, build

#: an RTX 5090 is in no cloud's catalog: the admin of a rented box names its price
CATALOG = load_catalog()
RTX = PricePolicy(catalog=CATALOG, provider="aws", overrides={"RTX-5090": Decimal("0.89")})

#: a node pool time-sliced 8 ways by NVIDIA's device plugin (``nvidia.com/gpu``, the
#: default ``renameByDefault: false``) with no label naming the GPU model
TIME_SLICED_LIST = """
hub:
  config:
    KubeSpawner:
      profile_list:
        - display_name: "Shared RTX 5090 (8 per GPU)"
          slug: rtx
          kubespawner_override:
            node_selector:
              hub.jupyter.org/node-purpose: gpu-shared
            extra_resource_limits:
              nvidia.com/gpu: "1"
        - display_name: "CPU only"
          slug: cpu
          default: true
"""

CONFIG = """
c.GpuCostHub.price_provider = "aws"
c.GpuCostHub.price_overrides = {{"RTX-5090": "0.89"}}
c.GpuCostHub.profiles_from = {path!r}
c.GpuCostHub.profile_gpus = {{"rtx": "RTX-5090"}}
c.GpuCostHub.gpu_sharing = {{"nvidia.com/gpu": 8}}
"""


def server(profile: str) -> ServerInfo:
    return ServerInfo(
        user="ada",
        server_name="",
        started=datetime(2026, 11, 29, tzinfo=UTC),
        ready=True,
        profile=profile,
        user_options={"profile": profile},
    )


@pytest.mark.parametrize(
    "written", ["RTX-5090 x 1/8", "1/8 x RTX-5090", {"gpu": "RTX-5090", "count": "1/8"}]
)
def test_a_fraction_the_admin_names_bills_that_share(written: object) -> None:
    policy = AllocationPolicy({"rtx": written}, "none", RTX)
    rate = policy.rate_for(server("rtx"))
    assert rate.allocation.share == Fraction(1, 8)
    assert rate.usd_per_hour == Decimal("0.11125")  # 0.89 / 8
    assert describe(rate.allocation) == "1/8 × RTX-5090 (shared 8 ways)"
    assert "admin override" in rate.source


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("T4 x 3/8", "'1/N' for a GPU shared by N pods"),
        ({"gpu": "T4", "count": 0.5}, "is not a whole number of GPUs, or '1/N'"),
        ("T4 x 1/0", "divides by zero"),
        ("T4 x 1/4096", "N from 2 to 1024"),
        ({"gpu": "T4", "count": True}, "is not a whole number"),
    ],
)
def test_a_count_that_is_no_share_of_one_gpu_is_refused_by_name(written: object, says: str) -> None:
    with pytest.raises(HubConfigError, match=r"profile_gpus\['t4'\]") as e:
        parse_allocation(written, setting="c.GpuCostHub.profile_gpus['t4']")
    assert says in str(e.value)


@settings(deadline=None, max_examples=200)
@given(n=st.integers(2, 1024), dollars=st.decimals("0.01", "120", places=6))
def test_a_share_never_bills_less_than_its_part_of_the_gpu(n: int, dollars: Decimal) -> None:
    prices = PricePolicy(catalog=CATALOG, provider="aws", overrides={"X": dollars})
    rate = AllocationPolicy({"p": f"X x 1/{n}"}, "none", prices).rate_for(server("p"))
    # rounded up to the micro-dollar: n shares bill at least the GPU, at most n µ$ more
    assert rate.usd_per_hour * n >= dollars
    assert rate.usd_per_hour * n - dollars < Decimal(n) / 10**6
    assert rate.usd_per_hour == rate.usd_per_hour.quantize(Decimal("0.000001"))


def test_gpu_sharing_applies_to_profile_gpus_without_a_profile_list() -> None:
    allocations = build(
        ProfileSettings(
            prices=RTX,
            profile_gpus={"rtx": "RTX-5090", "cpu": "none", "pair": "RTX-5090 x 1/2"},
            gpu_sharing={"nvidia.com/gpu": 8},
            default_gpu="RTX-5090",
        )
    )
    rtx = allocations.policy.rate_for(server("rtx"))
    assert describe(rtx.allocation) == "1/8 × RTX-5090 (shared 8 ways)"
    assert rtx.usd_per_hour == Decimal("0.11125")
    assert "c.GpuCostHub.gpu_sharing['nvidia.com/gpu'] = 8" in rtx.source
    # the default allocation is a share too; "none" stays no GPU; a share the admin
    # named is not shared again
    assert allocations.policy.rate_for(server("other")).usd_per_hour == Decimal("0.11125")
    assert allocations.policy.rate_for(server("cpu")).usd_per_hour == 0
    assert allocations.policy.rate_for(server("pair")).usd_per_hour == Decimal("0.445")


def test_a_label_key_of_gpu_sharing_does_not_share_profile_gpus_it_cannot_see() -> None:
    allocations = build(
        ProfileSettings(
            prices=RTX,
            profile_gpus={"rtx": "RTX-5090"},
            gpu_sharing={"cloud.google.com/gke-nodepool=shared": 4},
            default_gpu="none",
        )
    )
    assert allocations.policy.rate_for(server("rtx")).usd_per_hour == Decimal("0.89")


def test_check_profiles_bills_a_time_sliced_profile_named_by_profile_gpus_one_eighth(
    tmp_path: Path,
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(TIME_SLICED_LIST)
    code, out, err = run_check(tmp_path, CONFIG.format(path=str(values)))
    assert code == 0, err
    rtx = row(out, "rtx", "-")
    assert rtx[2:4] == ["1/8 × RTX-5090 (time-sliced 8 ways)", "$0.11125/h"]
    assert "c.GpuCostHub.gpu_sharing['nvidia.com/gpu']" in rtx[4]
    assert "c.GpuCostHub.profile_gpus['rtx']" in rtx[4]
    assert row(out, "cpu", "-")[2:4] == ["no GPU", "$0.00/h"]


def test_without_gpu_sharing_the_named_model_is_billed_whole(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(TIME_SLICED_LIST)
    config = CONFIG.format(path=str(values)).replace(
        'c.GpuCostHub.gpu_sharing = {"nvidia.com/gpu": 8}', ""
    )
    code, out, err = run_check(tmp_path, config)
    assert code == 0, err
    assert row(out, "rtx", "-")[2:4] == ["1 × RTX-5090", "$0.89/h"]
