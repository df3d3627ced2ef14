"""Profiles priced the way real Zero to JupyterHub configs are written
(``tests/data/real_configs``, README there says where each shape comes from): the list
found wherever Helm puts it, several values files merged, every extended resource priced
or refused by name, a pod's share of a shared node, MIG slices and time-sliced GPUs, and
``check-profiles --json`` for CI."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hub_admin_page import admin_page
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.core.i18n import messages_for
from jupyter_gpucost.hub import check_command as check_profiles
from jupyter_gpucost.hub.allocation import ceil_micro
from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.idle.policy import HubIdleClock, IdlePolicy
from jupyter_gpucost.hub.idle.reclaim import Reclaimer
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.reclaims import ReclaimStore
from jupyter_gpucost.hub.model import HubConfigError, ServerInfo
from jupyter_gpucost.hub.profiles import source as profile_source
from jupyter_gpucost.hub.profiles.gpus import Prices, rate_of
from jupyter_gpucost.hub.profiles.node_terms import Unpriced
from jupyter_gpucost.hub.profiles.settings import ProfileSettings, build, derived_prices
from jupyter_gpucost.hub.profiles.table import ProfileSource, ProfileTable
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web import views

DATA = Path(__file__).parent / "data" / "real_configs"
T4 = '--GpuCostHub.price_overrides={"T4": "0.35"}'


def check(*argv: str) -> tuple[int, list[dict[str, object]], str]:
    """check-profiles with the service's own flags, ``--json``, run in-process."""
    out, err = io.StringIO(), io.StringIO()
    code = check_profiles.main(
        ["--config", str(DATA / "gpucost_hub_config.py"), "--json", *argv], out, err
    )
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
    return code, lines, err.getvalue()


def by_profile(lines: list[dict[str, object]], slug: str, choice: str = "-") -> dict[str, object]:
    for line in lines:
        if line["profile"] == slug and line["choice"] == choice:
            return line
    raise AssertionError(f"no {slug} {choice} in {lines}")


def aws(**overrides: str) -> Prices:
    policy = PricePolicy(
        catalog=load_catalog(),
        provider="aws",
        overrides={k: Decimal(v) for k, v in overrides.items()},
        region="us-east-1",
    )
    return derived_prices(policy)


# -- where Helm puts the list -----------------------------------------------------------


def test_a_basehub_subchart_list_is_found_and_its_path_said() -> None:
    code, lines, err = check("-f", str(DATA / "2i2c-neurohackademy.values.yaml"), T4)
    assert code == 0, err
    gpu = by_profile(lines, "gpu")
    # the GPU profile is not "no GPU": the instance type's row names its T4
    assert gpu["gpus"] == {
        "model": "T4",
        "count": "1",
        "detail": "",
        "instance": "",
        "instance_gpus": 0,
        "text": "1 × T4",
    }
    assert (gpu["per_hour"], gpu["currency"]) == ("0.35", "USD")
    assert by_profile(lines, "custom", "image=(unlisted), gpu=01-yes")["per_hour"] == "0.35"
    assert by_profile(lines, "small")["gpus"]["text"] == "no GPU"  # type: ignore[index]
    source = profile_source.read(str(DATA / "2i2c-neurohackademy.values.yaml"))
    assert source.origin.endswith(" jupyterhub.singleuser.profileList")


def test_a_daskhub_list_under_basehub_jupyterhub_with_a_requests_option() -> None:
    code, lines, err = check("-f", str(DATA / "2i2c-dask-gpu.values.yaml"), T4)
    assert code == 0, err
    assert by_profile(lines, "machine", "requests=gpu_t4")["per_hour"] == "0.35"
    mem = by_profile(lines, "machine", "requests=mem_4")
    assert (mem["per_hour"], mem["gpus"]["text"]) == ("0", "no GPU")  # type: ignore[index]
    # `nvidia.com/gpu: "0"` on the CPU profile, said in its source
    cpu = by_profile(lines, "cpu")
    assert cpu["per_hour"] == "0"
    assert "nvidia.com/gpu is 0" in str(cpu["source"])


def test_no_profile_list_anywhere_is_an_error_naming_every_path_looked_at() -> None:
    """2i2c's real daskhub pair has no list: never "no profiles" priced $0."""
    code, lines, err = check(
        "-f",
        str(DATA / "2i2c-daskhub-common.values.yaml"),
        "-f",
        str(DATA / "2i2c-dask-staging.values.yaml"),
    )
    assert code == 2
    assert "no profile list found; looked at singleuser.profileList, " in err
    assert "basehub.jupyterhub.singleuser.profileList" in err
    assert "basehub.jupyterhub.hub.config.KubeSpawner.profile_list" in err
    assert lines == [{"error": err.removeprefix("check-profiles: ").strip()}]


def test_values_files_merge_in_helms_order_lists_replaced(tmp_path: Path) -> None:
    source = profile_source.read(
        [str(DATA / "helm-common.values.yaml"), str(DATA / "helm-prod.values.yaml")]
    )
    # the later file's list replaces the earlier's; its maps merge with the earlier's
    assert [p["slug"] for p in source.profiles] == ["prod"]  # type: ignore[attr-defined, index]
    assert source.base == {"node_selector": {"hub.jupyter.org/node-purpose": "user"}}
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text("singleuser: {nodeSelector: {pool: gpu, zone: a}, profileList: [{slug: x}]}\n")
    b.write_text("singleuser: {nodeSelector: {zone: null, team: ml}}\n")
    merged = profile_source.read([str(a), str(b)])
    # null removes a key, as `helm -f` does
    assert merged.base == {"node_selector": {"pool": "gpu", "team": "ml"}}


def test_two_hubs_lists_in_one_file_are_refused(tmp_path: Path) -> None:
    values = tmp_path / "v.yaml"
    values.write_text(
        "singleuser: {profileList: [{slug: a}]}\njupyterhub: {singleuser: {profileList: []}}\n"
    )
    with pytest.raises(HubConfigError, match=r"profile lists at .* jupyterhub\.singleuser"):
        profile_source.read(str(values))


def test_a_jupyterhub_config_py_with_no_profile_list_is_an_error(tmp_path: Path) -> None:
    config = tmp_path / "jupyterhub_config.py"
    config.write_text("c.KubeSpawner.node_selector = {'pool': 'gpu'}\n")
    with pytest.raises(HubConfigError, match="no profile list found; looked at top-level"):
        profile_source.read(str(config))


# -- every extended resource priced or refused by name -------------------------------------


def test_shared_nodes_mig_and_unknown_accelerators() -> None:
    code, lines, err = check(
        "-f", str(DATA / "shared-nodes.values.yaml"), "--GpuCostHub.price_region=us-east-1"
    )
    assert code == 2
    # a pod with 1 of a p4d's 8 GPUs pays 1/8 of it, not $21.96/h
    one = by_profile(lines, "p4d-one")
    assert one["gpus"]["text"] == "1/8 of p4d.24xlarge (1 × A100-40GB)"  # type: ignore[index]
    assert one["per_hour"] == f"{ceil_micro(Fraction('21.957642') / 8).normalize():f}"
    assert str(one["source"]).startswith("1/8 of instance p4d.24xlarge")
    # all eight: the whole node (each GPU's share rounded up to the micro-dollar)
    all8 = by_profile(lines, "p4d-all")
    assert Decimal("21.957642") <= Decimal(str(all8["per_hour"])) < Decimal("21.957650")
    # a MIG 1g.5gb slice on that node: 1/7 of one of its A100s
    mig = by_profile(lines, "mig-small")
    assert mig["gpus"]["count"] == "1/7"  # type: ignore[index]
    assert mig["gpus"]["text"] == (  # type: ignore[index]
        "1/56 of p4d.24xlarge (1/7 × A100-40GB (MIG 1g.5gb))"
    )
    assert mig["per_hour"] == f"{ceil_micro(Fraction('21.957642') / 8 / 7).normalize():f}"
    # single strategy: the node's product label names the slice
    single = by_profile(lines, "mig-single")
    assert single["gpus"]["text"] == "3/7 × A100-40GB (MIG 3g.20gb)"  # type: ignore[index]
    # refused by name, with the setting that fixes it
    shared = by_profile(lines, "shared-t4")
    assert shared["per_hour"] is None
    assert "set c.GpuCostHub.gpu_sharing['nvidia.com/gpu.shared'] = <clients per GPU>" in str(
        shared["error"]
    )
    inf2 = by_profile(lines, "inf2")
    assert str(inf2["error"]).startswith("the pod requests aws.amazon.com/neuron: 1")
    assert "set c.GpuCostHub.profile_gpus['inf2']" in str(inf2["error"])
    assert "cannot price profile" in err
    # the model in prose only: refused, with what the words say
    prose = by_profile(lines, "prose-t4")
    assert "names the GPU model" in str(prose["error"])
    assert str(prose["hint"]).startswith(
        "profile 'prose-t4': display_name mentions T4: set "
        "c.GpuCostHub.profile_gpus['prose-t4'] = 'T4'"
    )
    assert "hint: profile 'prose-t4': display_name mentions T4" in err


def test_a_time_sliced_gpu_pays_its_share_from_the_setting() -> None:
    _, lines, _ = check(
        "-f",
        str(DATA / "shared-nodes.values.yaml"),
        '--GpuCostHub.gpu_sharing={"nvidia.com/gpu.shared": 4}',
        "--GpuCostHub.price_region=us-east-1",
    )
    shared = by_profile(lines, "shared-t4")
    assert shared["gpus"]["count"] == "1/4"  # type: ignore[index]
    assert shared["gpus"]["text"] == (  # type: ignore[index]
        "1/4 of g4dn.xlarge (1/4 × T4 (time-sliced 4 ways))"
    )
    assert shared["per_hour"] == "0.1315"  # 0.526 / 4


def test_gke_time_sharing_labels_set_the_share() -> None:
    code, lines, err = check(
        "-f",
        str(DATA / "gke-time-sharing.values.yaml"),
        "--GpuCostHub.price_provider=gcp",
        T4,
    )
    assert code == 0, err
    shared = by_profile(lines, "shared")
    assert shared["gpus"]["text"] == "1/4 × T4 (time-sliced 4 ways)"  # type: ignore[index]
    assert shared["per_hour"] == "0.0875"
    assert "cloud.google.com/gke-max-shared-clients-per-gpu=4" in str(shared["source"])
    assert by_profile(lines, "own")["per_hour"] == "0.35"


@pytest.mark.parametrize(
    "resource",
    ["amd.com/gpu", "google.com/tpu", "habana.ai/gaudi", "aws.amazon.com/neuroncore", "x.io/y"],
)
def test_any_other_extended_resource_is_refused_by_name(resource: str) -> None:
    state: dict[str, object] = {"extra_resource_guarantees": {resource: "2"}}
    with pytest.raises(Unpriced, match=f"the pod requests {resource}: 2"):
        rate_of(state, aws())


def test_mig_profile_shared_by_two_gpus_needs_the_gpu_named() -> None:
    state: dict[str, object] = {"extra_resource_limits": {"nvidia.com/mig-1g.10gb": 1}}
    with pytest.raises(
        Unpriced, match="slice of A100-40GB or A100-80GB or H100-80GB: name the GPU"
    ):
        rate_of(state, aws())
    state["node_selector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    rate = rate_of(state, aws())
    assert (rate.allocation.model, rate.allocation.share) == ("H100-80GB", Fraction(1, 7))


def test_a_not_for_sale_row_never_prices_a_pod() -> None:
    """gcp's a3-highgpu-1g is sold as Spot or Flex-start only: no on-demand share of it."""
    policy = PricePolicy(catalog=load_catalog(), provider="gcp")
    prices = derived_prices(policy)
    assert any(r.instance == "a3-highgpu-1g" and r.not_for_sale for r in prices.instances)
    state: dict[str, object] = {
        "node_selector": {"node.kubernetes.io/instance-type": "a3-highgpu-1g"},
        "extra_resource_limits": {"nvidia.com/gpu": 1},
    }
    with pytest.raises(Unpriced, match="names the GPU model"):
        rate_of(state, prices)
    with pytest.raises(Unpriced, match="a3-highgpu-1g' has no whole-instance price"):
        rate_of(state, prices, strict=True)


def test_the_fraction_rule_holds_for_every_multi_gpu_instance_in_the_catalog() -> None:
    """(k / the instance's GPUs) × its price, each GPU's share rounded up to the
    micro-dollar once: never below the exact share, never more than k micro-dollars
    above it; all its GPUs cost at least the instance."""
    checked = 0
    rows = derived_prices(PricePolicy(catalog=load_catalog())).instances
    # the hub prices whole instances in USD only (a CNY hub prices per GPU)
    shops = sorted({(r.provider, r.market) for r in rows if r.gpus > 1 and r.currency == "USD"})
    # each region's rows, priced in their region
    shops_in = sorted({(p, m, r.region) for p, m in shops for r in rows if r.provider == p})
    for provider, market, region in shops_in:
        policy = PricePolicy(
            catalog=load_catalog(), provider=provider, market=market, region=region
        )
        prices = derived_prices(policy)
        for row in prices.instances:
            shop = (row.provider, row.market, row.region)
            if row.gpus < 2 or row.not_for_sale or shop != (provider, market, region):
                continue
            for k in range(1, row.gpus + 1):
                state: dict[str, object] = {
                    "node_selector": {"node.kubernetes.io/instance-type": row.instance},
                    "extra_resource_limits": {"nvidia.com/gpu": k},
                }
                rate = rate_of(state, prices)
                exact = Fraction(row.per_hour) * k / row.gpus
                assert exact <= Fraction(rate.usd_per_hour) < exact + Fraction(k, 1_000_000)
                assert rate.allocation.count == k
                if k < row.gpus:
                    assert rate.allocation.instance == row.instance
            checked += 1
    assert {p for p, _ in shops} >= {"aws", "gcp", "azure", "lambda"}
    assert checked >= 40


def test_the_admin_view_and_table_keep_the_fraction() -> None:
    table = ProfileTable(
        profile_source.read(str(DATA / "gke-time-sharing.values.yaml")),
        derived_prices(
            PricePolicy(catalog=load_catalog(), provider="gcp", overrides={"T4": Decimal("1")})
        ),
    )
    rate = table.rate_for({"profile": "shared"})
    assert rate.usd_per_hour == Decimal("0.25")
    assert rate.allocation.share == Fraction(1, 4)


def test_a_hand_written_profile_source_still_prices() -> None:
    source = ProfileSource(
        "test",
        {"z": {"display_name": "B"}, "a": {"display_name": "A"}},  # dict: sorted by key
        {},
    )
    table = ProfileTable(source, aws())
    assert [line.slug for line in table.lines] == ["a", "b"]


# -- property: never a silent $0 for a pod that asks for a device -------------------------

_RESOURCES = st.sampled_from(
    [
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-1g.5gb",
        "nvidia.com/mig-3g.40gb",
        "nvidia.com/mig-9g.99gb",
        "amd.com/gpu",
        "aws.amazon.com/neuron",
        "aws.amazon.com/neuroncore",
        "google.com/tpu",
        "habana.ai/gaudi",
        "example.com/fpga",
    ]
)
_LABELS = st.sampled_from(
    [
        {},
        {"node.kubernetes.io/instance-type": "p4d.24xlarge"},
        {"node.kubernetes.io/instance-type": "g5.12xlarge"},
        {"node.kubernetes.io/instance-type": "r5.xlarge"},
        {"node.kubernetes.io/instance-type": "inf2.xlarge"},
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"},
        {"nvidia.com/gpu.product": "Tesla-T4"},
        {"karpenter.k8s.aws/instance-gpu-name": "t4", "nvidia.com/gpu.replicas": "4"},
    ]
)
_COUNTS = st.one_of(st.integers(0, 16), st.sampled_from(["0", "1", "8", "0.5", "-1", "1e3"]))
_OVERRIDE = st.fixed_dictionaries(
    {},
    optional={
        "extra_resource_limits": st.dictionaries(_RESOURCES, _COUNTS, max_size=2),
        "extra_resource_guarantees": st.dictionaries(_RESOURCES, _COUNTS, max_size=2),
        "node_selector": _LABELS,
    },
)
_PROFILES = st.lists(
    st.fixed_dictionaries(
        {"display_name": st.text("abcdefgh", min_size=1, max_size=6)},
        optional={
            "kubespawner_override": _OVERRIDE,
            "profile_options": st.fixed_dictionaries(
                {
                    "o": st.fixed_dictionaries(
                        {
                            "choices": st.dictionaries(
                                st.sampled_from(["x", "y", "z"]),
                                st.fixed_dictionaries({"kubespawner_override": _OVERRIDE}),
                                min_size=1,
                                max_size=3,
                            )
                        }
                    )
                }
            ),
        },
    ),
    min_size=1,
    max_size=4,
    # KubeSpawner starts the first of two profiles with one slug: the second is never a pod
    unique_by=lambda p: str(p["display_name"]),
)


def _asks_a_device(profile: dict[str, object], choice: str) -> bool:
    overrides = [profile.get("kubespawner_override") or {}]
    options = profile.get("profile_options") or {}
    if choice != "-" and isinstance(options, dict):
        picked = choice.split("=", 1)[1]
        overrides.append(options["o"]["choices"][picked]["kubespawner_override"])
    asked: dict[str, object] = {}
    for override in overrides:
        assert isinstance(override, dict)
        for setting in ("extra_resource_limits", "extra_resource_guarantees"):
            asked.update(override.get(setting) or {})
    return any(str(v).strip() not in ("0",) for v in asked.values())


_AWS: list[Prices] = []


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles=_PROFILES, sharing=st.sampled_from([{}, {"nvidia.com/gpu.shared": 3}]))
def test_a_profile_asking_for_any_device_never_prices_at_zero_silently(
    profiles: list[dict[str, object]], sharing: dict[str, int]
) -> None:
    if not _AWS:
        _AWS.append(aws(T4="0.35"))
    prices = Prices(_AWS[0].policy, _AWS[0].instances, gpu_sharing=sharing)
    table = ProfileTable(ProfileSource("generated", profiles, {}), prices)
    if table.unreadable:
        return  # two profiles with one slug and the like: refused whole, by name
    by_slug = {p["slug"]: p for p in table.profiles}
    for line in table.lines:
        if line.rate is None:
            assert line.problem or line.from_text  # refused, saying why
            continue
        if line.rate.usd_per_hour > 0:
            continue
        # $0: only with a line saying why, and never for a pod asking for a device
        assert line.rate.source.startswith("no GPU (")
        assert not _asks_a_device(by_slug[line.slug], line.choice), line


def test_the_admin_page_writes_the_fraction_in_its_language() -> None:
    from jupyter_gpucost.hub.web.page_words import gpus_text

    server = {
        "gpus": "1/4 of g4dn.xlarge (1/4 × T4 (time-sliced 4 ways))",
        "allocation": {
            "model": "T4",
            "count": 1,
            "share": "1/4",
            "detail": "time-sliced 4 ways",
            "instance": "g4dn.xlarge",
            "instance_gpus": 1,
        },
    }
    assert gpus_text(server, messages_for("en")) == server["gpus"]
    assert gpus_text(server, messages_for("zh_CN")) == (
        "g4dn.xlarge 的 1/4（1/4 × T4（4 路时间分片））"  # noqa: RUF001
    )
    # a row the page cannot read back is shown as the service wrote it
    assert gpus_text({"gpus": "2 × L4", "allocation": {"share": "1/0"}}, messages_for("zh_CN")) == (
        "2 × L4"
    )


def test_gpu_sharing_by_a_node_label_and_by_gpu_feature_discoverys_replicas() -> None:
    base = aws(T4="0.40")
    state: dict[str, object] = {
        "node_selector": {
            "karpenter.k8s.aws/instance-gpu-name": "t4",
            "karpenter.sh/nodepool": "shared-t4",
        },
        "extra_resource_limits": {"nvidia.com/gpu": 1},
    }
    # not known to be shared: the whole T4
    assert rate_of(state, base).usd_per_hour == Decimal("0.40")
    shared = Prices(base.policy, base.instances, gpu_sharing={"karpenter.sh/nodepool=shared-t4": 2})
    rate = rate_of(state, shared)
    assert (rate.usd_per_hour, rate.allocation.share) == (Decimal("0.2"), Fraction(1, 2))
    assert "c.GpuCostHub.gpu_sharing['karpenter.sh/nodepool=shared-t4']" in rate.source
    state["node_selector"] = {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.replicas": "8"}
    assert rate_of(state, base).usd_per_hour == Decimal("0.05")
    # GKE's strategy without its clients label says what to add
    state["node_selector"] = {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-t4",
        "cloud.google.com/gke-gpu-sharing-strategy": "time-sharing",
    }
    with pytest.raises(
        Unpriced, match=r"without cloud\.google\.com/gke-max-shared-clients-per-gpu"
    ):
        rate_of(state, base)


def test_gpu_sharing_is_checked_at_start() -> None:
    code, _, err = check(
        "-f",
        str(DATA / "shared-nodes.values.yaml"),
        '--GpuCostHub.gpu_sharing={"nvidia.com/gpu.shared": 0}',
    )
    assert code == 2
    assert "c.GpuCostHub.gpu_sharing['nvidia.com/gpu.shared'] = 0: a GPU is shared by 1 to" in err


class _Hub:
    """The Hub API as the service polls it: one running server."""

    def __init__(self, servers: list[ServerInfo]) -> None:
        self.servers = servers

    async def active_servers(self) -> list[ServerInfo]:
        return self.servers

    async def stopped_at(self, user: str, server_name: str) -> datetime | None:
        return None  # a stand-in Hub keeps no record of stopped servers

    async def groups_of_users(self) -> dict[str, tuple[str, ...]]:
        return {}

    async def stop_server(self, user: str, server_name: str) -> str:
        return "stopped"


async def test_the_admin_page_shows_a_pods_share_of_its_node(tmp_path: Path) -> None:
    now = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
    settings = ProfileSettings(
        prices=PricePolicy(catalog=load_catalog(), region="us-east-1"),
        profiles_from=str(DATA / "shared-nodes.values.yaml"),
        profile_gpus={"shared-t4": "T4", "inf2": "none", "prose-t4": "T4"},
    )
    policy = build(settings).policy
    ledger = HubLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    reclaimer = Reclaimer(
        IdlePolicy(None), HubIdleClock(max_step_s=10), ReclaimStore(ledger.engine)
    )
    svc = HubService(ledger, policy.rate_for, HubBudgetPolicy(None), HubEnforcer(60), reclaimer)
    server = ServerInfo("alice", "", now, True, "mig-small", {"profile": "mig-small"})
    await svc.poll(_Hub([server]), lambda: now)
    data = views.admin_summary(svc, now, now.date())
    text = "1/56 of p4d.24xlarge (1/7 × A100-40GB (MIG 1g.5gb))"
    assert [s["gpus"] for u in data["users"] for s in u["running"]] == [text]
    assert text in views.users_csv(data)

    def page(language: str) -> str:
        return admin_page(svc, language, now, user="erin")

    assert f"{text} at $0.39/h" in page("en")
    chinese = "p4d.24xlarge 的 1/56（1/7 × A100-40GB（MIG 1g.5gb））"  # noqa: RUF001
    assert chinese in page("zh_CN")
