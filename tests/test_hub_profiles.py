"""Profiles priced from the hub's own KubeSpawner config (``c.GpuCostHub.profiles_from``)
and ``python -m jupyter_gpucost.hub check-profiles``.

The profile files are in tests/data/profiles: a Zero to JupyterHub values.yaml for GKE
and a jupyterhub_config.py for EKS with Karpenter (one profile with a callable override),
and one whose profile list is a callable.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.hub import check_command as check_profiles
from jupyter_gpucost.hub.model import ServerInfo
from jupyter_gpucost.hub.profiles import source as profile_source
from jupyter_gpucost.hub.profiles.settings import Allocations, ProfileSettings, build

DATA = Path(__file__).parent / "data" / "profiles"
VALUES = DATA / "z2jh_values.yaml"
HUB_CONFIG = DATA / "jupyterhub_config.py"
CALLABLE = DATA / "jupyterhub_config_callable.py"
ROOT = Path(__file__).resolve().parents[1]
#: GKE's catalog rows have no per-GPU T4 or A100 80GB: the admin names their prices
GCP_CONFIG = """
c.GpuCostHub.price_provider = "gcp"
c.GpuCostHub.price_region = "us-central1"
c.GpuCostHub.price_overrides = {{"T4": "0.35", "A100-80GB": "5.07"}}
c.GpuCostHub.profiles_from = {path!r}
"""


def run_check(tmp_path: Path, config: str, *extra: str) -> tuple[int, str, str]:
    (tmp_path / "gpucost_hub_config.py").write_text(config)
    out, err = io.StringIO(), io.StringIO()
    code = check_profiles.main(
        ["--config", str(tmp_path / "gpucost_hub_config.py"), *extra], out, err
    )
    return code, out.getvalue(), err.getvalue()


def row(output: str, slug: str, choice: str) -> list[str]:
    """The columns of one line of check-profiles' table (split on two spaces or more)."""
    for line in output.splitlines():
        cells = [c for c in line.split("  ") if c.strip()]
        if len(cells) >= 5 and cells[0].strip() == slug and cells[1].strip() == choice:
            return [c.strip() for c in cells]
    raise AssertionError(f"no line for {slug} {choice} in:\n{output}")


def gcp() -> PricePolicy:
    return PricePolicy(
        catalog=load_catalog(),
        provider="gcp",
        overrides={"T4": Decimal("0.35"), "A100-80GB": Decimal("5.07")},
        region="us-central1",
    )


# -- check-profiles -------------------------------------------------------------------


def test_check_profiles_prices_every_profile_and_choice_of_a_z2jh_values_yaml(
    tmp_path: Path,
) -> None:
    code, out, err = run_check(tmp_path, GCP_CONFIG.format(path=str(VALUES)))
    assert code == 0, err
    assert out.startswith(f"profiles from {VALUES} singleuser.profileList\n")
    # the default profile, slug derived from its display name, no GPU
    assert row(out, "small-cpu", "-")[2:4] == ["no GPU", "$0.00/h"]
    t4 = row(out, "t4", "image=pytorch")
    assert t4[2:4] == ["1 × T4", "$0.35/h"]
    assert "cloud.google.com/gke-accelerator=nvidia-tesla-t4" in t4[4]
    assert "extra_resource_limits nvidia.com/gpu" in t4[4]
    assert "admin override (c.GpuCostHub.price_overrides['T4'])" in t4[4]
    assert row(out, "t4", "image=tensorflow")[2:4] == ["1 × T4", "$0.35/h"]
    # an unlisted image does not change the GPU: priced like the profile
    assert row(out, "t4", "image=(unlisted)")[2:4] == ["1 × T4", "$0.35/h"]
    # the choice's overrides are merged over the profile's (count 1 → 2, selector added)
    assert row(out, "large-gpu", "gpu=l4")[2:4] == ["1 × L4", "$0.70683/h"]
    a100 = row(out, "large-gpu", "gpu=a100")
    assert a100[2:4] == ["2 × A100-80GB", "$10.14/h"]
    assert "2 (extra_resource_limits nvidia.com/gpu)" in a100[4]
    # a named instance type: its whole-instance price
    g2 = row(out, "g2-node", "-")
    assert g2[2:4] == ["1 × L4", "$0.70683/h"]
    assert g2[4].startswith(
        "whole instance g2-standard-4 (node_selector node.kubernetes.io/instance-type)"
    )
    # a required node affinity
    h100 = row(out, "h100", "-")
    assert h100[2:4] == ["1 × H100-80GB", "$11.06125/h"]
    assert "node_affinity_required cloud.google.com/gke-accelerator In" in h100[4]


def test_the_check_runs_as_a_module_command(tmp_path: Path) -> None:
    (tmp_path / "gpucost_hub_config.py").write_text(GCP_CONFIG.format(path=str(VALUES)))
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_gpucost.hub", "check-profiles"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert row(done.stdout, "large-gpu", "gpu=a100")[2:4] == ["2 × A100-80GB", "$10.14/h"]


def test_a_jupyterhub_config_py_is_read_without_running_it(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    config = tmp_path / "jupyterhub_config.py"
    # had it been run, this line would have created the file
    config.write_text(HUB_CONFIG.read_text() + f"\nopen({str(sentinel)!r}, 'w').close()\n")
    code, out, err = run_check(
        tmp_path,
        f"c.GpuCostHub.profiles_from = {str(config)!r}\nc.GpuCostHub.price_region = 'us-east-1'\n",
    )
    assert not sentinel.exists()
    assert code == 2
    assert row(out, "cpu", "-")[2:4] == ["no GPU", "$0.00/h"]
    a10g = row(out, "gpu", "gpu=a10g")
    assert a10g[2:4] == ["1 × A10G", "$1.006/h"]
    assert "karpenter.k8s.aws/instance-gpu-name=a10g" in a10g[4]
    # 2i2c's way: the instance type directly under kubespawner_override; the whole node
    l4 = row(out, "gpu", "gpu=4x-l4")
    assert l4[2:4] == ["4 × L4", "$4.6016/h"]
    assert "kubespawner_override node.kubernetes.io/instance-type" in l4[4]
    # the unlisted choice puts the user's text into the node selector
    text = row(out, "gpu", "gpu=(unlisted)")
    assert text[2:4] == ["from the text", "at run time"]
    # the dearest GPU the provider sells anywhere (São Paulo's p5.48xlarge): a text may name
    # a GPU the hub's region has no row of, priced at its dearest region's
    assert "any other at the dearest rate ($92.4672/h)" in text[4]
    assert row(out, "p5", "-")[2:4] == ["8 × H100-80GB", "$55.04/h"]
    # the callable cannot be read: said, and the exit code says the service won't start
    team = row(out, "team-gpu", "-")
    assert team[3] == "CANNOT PRICE"
    assert "extra_resource_limits cannot be read statically" in team[4]
    assert "kubespawner_override extra_resource_limits is a lambda at line" in team[4]
    assert "cannot price: profile 'team-gpu'" in err


def test_profile_gpus_covers_a_profile_that_cannot_be_read(tmp_path: Path) -> None:
    config = (
        f"c.GpuCostHub.profiles_from = {str(HUB_CONFIG)!r}\n"
        'c.GpuCostHub.profile_gpus = {"team-gpu": "A100-80GB x 2"}\n'
        "c.GpuCostHub.price_region = 'us-east-1'\n"
    )
    code, out, err = run_check(tmp_path, config)
    assert code == 0, err
    team = row(out, "team-gpu", "-")
    assert team[2:4] == ["2 × A100-80GB", "$6.862/h"]
    assert team[4].startswith("c.GpuCostHub.profile_gpus['team-gpu'] override")


def test_a_callable_profile_list_is_named_and_fails_the_check(tmp_path: Path) -> None:
    aws = 'c.GpuCostHub.price_provider = "aws"\n'
    code, out, err = run_check(tmp_path, f"c.GpuCostHub.profiles_from = {str(CALLABLE)!r}\n" + aws)
    assert code == 2
    assert "the profile list is the function profiles_for() (a callable)" in out
    assert "it cannot be read statically" in err
    # with profile_gpus and default_gpu, the admin prices every server: the check passes
    code, out, err = run_check(
        tmp_path,
        f"c.GpuCostHub.profiles_from = {str(CALLABLE)!r}\n"
        'c.GpuCostHub.profile_gpus = {"gpu": "T4"}\nc.GpuCostHub.default_gpu = "none"\n' + aws,
    )
    assert code == 0, err
    assert "cannot be read statically" in out


def test_a_profile_with_no_price_stops_the_service_at_start(tmp_path: Path) -> None:
    # a GPU limit with nothing that names the GPU's model
    values = tmp_path / "values.yaml"
    values.write_text(
        "singleuser:\n  profileList:\n"
        "    - display_name: MI300\n"
        "      kubespawner_override:\n"
        "        extra_resource_limits: {amd.com/gpu: 1, nvidia.com/gpu: 1}\n"
        "    - display_name: T4\n"
        "      kubespawner_override:\n"
        "        extra_resource_limits: {nvidia.com/gpu: 1}\n"
        "        node_selector: {nvidia.com/gpu.product: Tesla-T4}\n"
    )
    (tmp_path / "gpucost_hub_config.py").write_text(
        f"c.GpuCostHub.profiles_from = {str(values)!r}\n"
        f"c.GpuCostHub.data_dir = {str(tmp_path / 'data')!r}\n"
        "c.GpuCostHub.price_provider = 'aws'\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_gpucost.hub", "--config", "gpucost_hub_config.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "JUPYTERHUB_API_TOKEN": "x" * 32},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "gpucost-hub: c.GpuCostHub.profiles_from: cannot price profile 'mi300': "
        "the pod requests amd.com/gpu: 1 (extra_resource_limits amd.com/gpu), which no "
        "catalog row prices: set c.GpuCostHub.profile_gpus['mi300'] to what it costs"
    ), done.stderr


# -- forged user_options ---------------------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LABELS = [
    "nvidia-tesla-t4",
    "nvidia-l4",
    "nvidia-h100-80gb",
    "t4",
    "a10g",
    "l4",
    "h100",
    "a100",
    "Tesla-T4",
]


@cache
def gke_allocations() -> Allocations:
    return build(ProfileSettings(prices=gcp(), profiles_from=str(VALUES)))


def _text() -> st.SearchStrategy[object]:
    return st.one_of(
        st.sampled_from(LABELS),
        st.text(max_size=40),
        st.text(min_size=300, max_size=2000),
        st.integers(),
        st.none(),
        st.lists(st.text(max_size=3), max_size=2),
    )


@st.composite
def forged_options(draw: st.DrawFn) -> dict[str, object]:
    keys = st.sampled_from(
        ["profile", "image", "gpu", "image--unlisted-choice", "gpu--unlisted-choice", "x"]
    )
    values = st.one_of(
        st.sampled_from(
            ["t4", "large-gpu", "small-cpu", "g2-node", "h100", "gpu", "p5", "cpu", "nope"]
        ),
        st.sampled_from(["a100", "l4", "pytorch", "tensorflow", "a10g", "4x-l4", ""]),
        _text(),
    )
    return draw(st.dictionaries(keys, values, max_size=4))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=forged_options())
def test_forged_user_options_never_bill_below_the_profile_they_name(
    options: dict[str, object],
) -> None:
    """Whatever a user sends, the bill is the rate of a profile KubeSpawner would start
    with those options, or the dearest: never less than what the pod got."""
    allocations = gke_allocations()
    assert allocations.policy.derived is not None
    assert allocations.table is not None
    dearest = max(line.rate.usd_per_hour for line in allocations.table.lines if line.rate)
    server = ServerInfo("u", "", started=T0, ready=True, user_options=options)
    rate = allocations.policy.rate_for(server)
    slug = options.get("profile") or "small-cpu"
    if slug not in ("t4", "large-gpu", "small-cpu", "g2-node", "h100"):
        assert rate.usd_per_hour == dearest
        assert "KubeSpawner would not start these user_options" in rate.source
    assert rate.usd_per_hour >= 0
    # an allocation is a catalog model × count, never text the user sent
    assert rate.allocation.model in ("", "T4", "L4", "A100-80GB", "H100-80GB")


def test_a_config_that_hands_kubespawner_to_code_is_not_read_as_empty(tmp_path: Path) -> None:
    # the shape of Zero to JupyterHub's own jupyterhub_config.py: the profile list comes
    # from the chart's values through a helper, so the file alone does not say it
    config = tmp_path / "jupyterhub_config.py"
    config.write_text(
        "from z2jh import get_config, set_config_if_not_none\n"
        "c.KubeSpawner.cpu_limit = 2\n"
        "for trait, key in (('profile_list', 'singleuser.profileList'),):\n"
        "    set_config_if_not_none(c.KubeSpawner, trait, key)\n"
    )
    source = profile_source.read(str(config))
    assert str(source.profiles) == "<possibly set by the call at line 4>"
    code, out, err = run_check(
        tmp_path,
        f"c.GpuCostHub.profiles_from = {str(config)!r}\nc.GpuCostHub.price_provider = 'aws'\n",
    )
    assert code == 2
    assert "the profile list is possibly set by the call at line 4" in out
    assert "cannot be read statically" in err


def test_a_callable_profile_gpus_prices_first_and_its_none_falls_back() -> None:
    def by_group(server: ServerInfo) -> str | None:
        return "A100-80GB x 4" if "team" in server.groups else None

    allocations = build(
        ProfileSettings(
            prices=PricePolicy(catalog=load_catalog(), region="us-east-1"),
            profiles_from=str(HUB_CONFIG),
            profile_gpus=by_group,
        )
    )
    policy = allocations.policy
    team = {"profile": "team-gpu"}
    rate = policy.rate_for(ServerInfo("u", "", T0, True, "team-gpu", team, ("team",)))
    assert (rate.allocation.count, rate.usd_per_hour) == (4, Decimal("13.724"))
    # the callable says nothing: the derived price, or the dearest where there is none
    other = policy.rate_for(ServerInfo("u", "", T0, True, "team-gpu", team))
    assert other.usd_per_hour == Decimal("92.4672")  # sa-east-1's p5.48xlarge, the dearest
    assert "billed at the dearest rate" in other.source
    a10g = policy.rate_for(ServerInfo("u", "", T0, True, "gpu", {"profile": "gpu"}))
    assert (a10g.allocation.model, a10g.usd_per_hour) == ("A10G", Decimal("1.006"))
