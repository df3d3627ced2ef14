"""The service's reading of ``user_options`` against KubeSpawner's own code.

For any ``user_options`` a user can send (hypothesis: real slugs and choices, forged ones,
labels of cheaper GPUs as unlisted-choice texts, huge and non-text values), the real
``KubeSpawner.load_user_options`` (jupyterhub-kubespawner, in a mock spawner that never
reaches a cluster) says what the pod would get, or refuses the spawn. The service's rate
must be that pod's price, or, where KubeSpawner refuses (or the service does not trust
the text), the dearest rate of the profile list: never lower than what the pod got.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.hub.model import Rate, ServerInfo
from jupyter_gpucost.hub.profiles import source as profile_source
from jupyter_gpucost.hub.profiles.gpus import rate_of
from jupyter_gpucost.hub.profiles.kubespawner import (
    DICT_SETTINGS,
    DIRECT_LABELS,
    LIST_SETTINGS,
    Unreadable,
)
from jupyter_gpucost.hub.profiles.node_terms import Unpriced
from jupyter_gpucost.hub.profiles.settings import derived_prices
from jupyter_gpucost.hub.profiles.table import ProfileSource, ProfileTable

DATA = Path(__file__).parent / "data" / "profiles"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
#: a kube config that names no reachable cluster (KubeSpawner loads one at construction)
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: none, user: {token: "none"}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
"""


def _without_code(value: object) -> object:
    """The profile list with the values only the hub's code knows left out."""
    if isinstance(value, Mapping):
        return {k: _without_code(v) for k, v in value.items() if not isinstance(v, Unreadable)}
    if isinstance(value, list):
        return [_without_code(v) for v in value]
    return value


def _source(name: str) -> ProfileSource:
    source = profile_source.read(str(DATA / name))
    profiles = _without_code(source.profiles)
    assert isinstance(profiles, list)
    # the profile whose GPU count is a callable cannot be compared with the real thing
    profiles = [p for p in profiles if p.get("slug") != "team-gpu"]
    base = {k: v for k, v in source.base.items() if not isinstance(v, Unreadable)}
    return ProfileSource(source.origin, profiles, base)


GKE = _source("z2jh_values.yaml")
EKS = _source("jupyterhub_config.py")
GKE_PRICES = derived_prices(
    PricePolicy(
        catalog=load_catalog(),
        provider="gcp",
        overrides={"T4": Decimal("0.35"), "A100-80GB": Decimal("5.07")},
    )
)
EKS_PRICES = derived_prices(PricePolicy(catalog=load_catalog(), provider="aws"))
TABLES = {"gke": ProfileTable(GKE, GKE_PRICES), "eks": ProfileTable(EKS, EKS_PRICES)}


@dataclass
class Kube:
    loop: asyncio.AbstractEventLoop
    #: kubespawner.KubeSpawner
    spawner_class: type


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    config = tmp_path_factory.mktemp("kube") / "config"
    config.write_text(KUBECONFIG)
    before = os.environ.get("KUBECONFIG")
    # kubernetes_asyncio reads $KUBECONFIG when it is first imported
    os.environ["KUBECONFIG"] = str(config)
    spawner_class = importlib.import_module("kubespawner").KubeSpawner
    loop = asyncio.new_event_loop()
    try:
        yield Kube(loop, spawner_class)
    finally:
        # KubeSpawner's shared API client leaves a task that closes it
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
        if before is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = before


def kubespawner_pod(
    kube: Kube, source: ProfileSource, options: Mapping[str, object]
) -> dict[str, object] | None:
    """The GPU settings of the pod KubeSpawner would make; ``None``: it refuses."""
    return kube.loop.run_until_complete(_pod(kube.spawner_class, source, options))


async def _pod(
    spawner_class: type, source: ProfileSource, options: Mapping[str, object]
) -> dict[str, object] | None:
    spawner = spawner_class(_mock=True)
    spawner.profile_list = copy.deepcopy(source.profiles)
    for name, value in source.base.items():
        setattr(spawner, name, copy.deepcopy(value))
    spawner.user_options = copy.deepcopy(dict(options))
    try:
        await spawner.load_user_options()
    except Exception:  # KubeSpawner refuses the spawn (ValueError, KeyError, TypeError)
        return None
    state: dict[str, object] = {n: getattr(spawner, n) for n in (*DICT_SETTINGS, *LIST_SETTINGS)}
    for label in DIRECT_LABELS:
        if hasattr(spawner, label):
            state[label] = getattr(spawner, label)
    return state


def _texts() -> st.SearchStrategy[object]:
    return st.one_of(
        st.sampled_from(
            ["t4", "a10g", "l4", "h100", "a100", "nvidia-tesla-t4", "nvidia-l4", "Tesla-T4"]
        ),
        st.sampled_from(["quay.io/x:1", "T4 ", "t4\n", "{value}", "-1", "0"]),
        st.text(max_size=30),
        st.text(alphabet="abc4", min_size=257, max_size=600),
        st.integers(-5, 5),
        st.none(),
        st.lists(st.text(max_size=2), max_size=2),
    )


@st.composite
def user_options(draw: st.DrawFn) -> dict[str, object]:
    keys = st.sampled_from(
        ["profile", "image", "gpu", "image--unlisted-choice", "gpu--unlisted-choice", "other"]
    )
    values = st.one_of(
        st.sampled_from(
            ["t4", "large-gpu", "small-cpu", "g2-node", "h100", "gpu", "cpu", "p5", "free"]
        ),
        st.sampled_from(["pytorch", "tensorflow", "l4", "a100", "a10g", "4x-l4", ""]),
        _texts(),
    )
    options = draw(st.dictionaries(keys, values, max_size=4))
    # mostly real profiles and choices, so that most servers start and are priced
    if draw(st.booleans()):
        options["profile"] = draw(st.sampled_from(["t4", "large-gpu", "gpu", "p5", "g2-node"]))
    if draw(st.booleans()):
        options["gpu"] = draw(st.sampled_from(["l4", "a100", "a10g", "4x-l4"]))
    if draw(st.booleans()):
        options[draw(st.sampled_from(["gpu--unlisted-choice", "image--unlisted-choice"]))] = draw(
            _texts()
        )
    return options


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=user_options(), which=st.sampled_from(["gke", "eks"]))
def test_the_rate_is_the_pods_price_as_kubespawner_makes_the_pod(
    kube: Kube, options: dict[str, object], which: str
) -> None:
    source, prices, table = {
        "gke": (GKE, GKE_PRICES, TABLES["gke"]),
        "eks": (EKS, EKS_PRICES, TABLES["eks"]),
    }[which]
    assert not table.problems
    assert table.dearest is not None
    dearest = table.dearest.usd_per_hour
    ours = table.rate_for(options)
    pod = kubespawner_pod(kube, source, options)
    if pod is None:
        # KubeSpawner does not start such a server: billed the dearest, never less
        assert ours.usd_per_hour == dearest, (options, ours)
        return
    try:
        theirs: Rate | None = rate_of(pod, prices)
    except Unpriced:
        theirs = None  # e.g. a text that names no GPU: no node has that label
    assert ours.usd_per_hour >= (theirs.usd_per_hour if theirs else 0), (options, ours)
    trusted = "billed at the dearest rate" not in ours.source
    if trusted:
        assert theirs is not None, (options, ours)
        assert (ours.allocation, ours.usd_per_hour) == (theirs.allocation, theirs.usd_per_hour)
    else:
        assert ours.usd_per_hour == dearest


def test_a_cheaper_gpu_typed_as_an_unlisted_choice_is_the_gpu_the_pod_gets(kube: Kube) -> None:
    table = TABLES["eks"]
    typed = {"profile": "gpu", "gpu--unlisted-choice": "t4"}
    pod = kubespawner_pod(kube, EKS, typed)
    assert pod is not None
    assert pod["node_selector"] == {
        "karpenter.sh/nodepool": "users",
        "karpenter.k8s.aws/instance-gpu-name": "t4",
    }
    rate = table.rate_for(typed)
    assert (rate.allocation.model, rate.allocation.count) == ("T4", 1)
    # a text KubeSpawner's regex refuses, or one no node carries, is billed the dearest (the
    # hub's region not known: 8 × sa-east-1's H100, the dearest region's)
    for text in ("T4 GPU please", "t4x"):
        forged = {"profile": "gpu", "gpu--unlisted-choice": text}
        assert table.rate_for(forged).usd_per_hour == Decimal("92.4672")
    server = ServerInfo("u", "", T0, True, "gpu", {"profile": "gpu", "gpu": "nope"})
    assert table.rate_for(server.user_options).usd_per_hour == Decimal("92.4672")
