"""The pure parts of GPU use from the cluster: KubeSpawner's pod names, reading Prometheus's
answers (a trust boundary: property tests with hostile values), joining dcgm-exporter's
series to servers in each label shape, the used/idle split, the disagreement rule and the
settings."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.hub.activity import GpuActivity
from jupyter_gpucost.hub.app import GpuCostHub
from jupyter_gpucost.hub.cluster.dcgm import (
    ENERGY,
    GR_ACTIVE,
    POWER,
    UTIL,
    activities,
    disagreement,
    queries,
    split,
)
from jupyter_gpucost.hub.cluster.promanswer import (
    MAX_SERIES,
    AnswerRefused,
    Sample,
    Vector,
    parse_vector,
)
from jupyter_gpucost.hub.cluster.prometheus import PrometheusAuth, shown_url
from jupyter_gpucost.hub.model import HubConfigError
from jupyter_gpucost.hub.profiles.podname import PodNames

AT = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
CASES = json.loads((Path(__file__).parent / "data" / "kubespawner_pod_names.json").read_text())


# -- pod names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case", CASES["cases"], ids=lambda c: f"{c['slug_scheme']}:{c['template']}:{c['user']!r}"
)
def test_pod_names_are_kubespawners(case: dict[str, str]) -> None:
    names = PodNames(case["template"], case["slug_scheme"])  # type: ignore[arg-type]
    assert names.pod_name(case["user"], case["server_name"]) == case["pod_name"]


def test_a_template_field_the_hub_cannot_know_is_named() -> None:
    with pytest.raises(ValueError, match=r"\{userid\}"):
        PodNames("jupyter-{userid}")
    with pytest.raises(ValueError, match=r"\{username.upper\}"):
        PodNames("jupyter-{username.upper}")


# -- Prometheus's answers ----------------------------------------------------------------


def answer(result: object, status: str = "success") -> bytes:
    return json.dumps(
        {"status": status, "data": {"resultType": "vector", "result": result}}
    ).encode()


def test_values_that_are_not_finite_numbers_drop_their_series() -> None:
    result = [
        {"metric": {"pod": "a"}, "value": [1, "87"]},
        {"metric": {"pod": "b"}, "value": [1, "NaN"]},
        {"metric": {"pod": "c"}, "value": [1, "+Inf"]},
        {"metric": {"pod": "d"}, "value": [1, 87]},
        {"metric": {"pod": 5}, "value": [1, "1"]},
        {"metric": {"pod": "e"}, "value": [1, "1e999"]},
        "not a series",
    ]
    vector = parse_vector(answer(result))
    assert [s.labels["pod"] for s in vector.samples] == ["a"]
    assert vector.refused == 6


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(["NaN", "+Inf", "-Inf", "9223372036854775794", "1e308", "87"]),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)
series = st.fixed_dictionaries(
    {
        "metric": st.dictionaries(
            st.sampled_from(["pod", "namespace", "gpu", "UUID"]), json_values
        ),
        "value": st.lists(json_values, max_size=3) | json_values,
    }
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        json_values.map(lambda v: json.dumps(v).encode()),
        st.lists(series | json_values, max_size=20).map(answer),
        st.binary(max_size=200),
    )
)
def test_any_answer_is_a_vector_of_finite_values_or_refused_with_a_reason(body: bytes) -> None:
    try:
        vector = parse_vector(body)
    except AnswerRefused as e:
        why = str(e)
    else:
        why = ""
    if why:
        assert "\n" not in why
        return
    for sample in vector.samples:
        assert math.isfinite(sample.value)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in sample.labels.items())


def test_thousands_of_series_past_the_bound_are_refused_whole() -> None:
    result = [{"metric": {"pod": f"p{i}"}, "value": [1, "1"]} for i in range(MAX_SERIES + 1)]
    with pytest.raises(AnswerRefused, match="prometheus_namespace"):
        parse_vector(answer(result))


def test_an_error_answer_says_what_prometheus_said_in_one_short_line() -> None:
    body = json.dumps({"status": "error", "errorType": "timeout", "error": "x\n" * 1000}).encode()
    with pytest.raises(AnswerRefused) as e:
        parse_vector(body)
    assert str(e.value).startswith("Prometheus says timeout: x x")
    assert len(str(e.value)) < 700


# -- joining series to servers -----------------------------------------------------------

LABELS = {
    "gpu": "0",
    "UUID": "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",
    "pci_bus_id": "00000000:10:00.0",
    "device": "nvidia0",
    "modelName": "NVIDIA H100 80GB HBM3",
    "Hostname": "gpu-node-1",
    "DCGM_FI_DRIVER_VERSION": "550.54.15",
    "container": "notebook",
    "namespace": "jhub",
    "pod": "jupyter-alice",
}
#: honor_labels false: the target's labels win, the scraped ones are renamed
RENAMED = {
    **{k: v for k, v in LABELS.items() if k not in ("pod", "namespace", "container", "Hostname")},
    "hostname": "gpu-node-1",
    "exported_pod": "jupyter-alice",
    "exported_namespace": "jhub",
    "exported_container": "notebook",
    "pod": "nvidia-dcgm-exporter-7xkq2",
    "namespace": "gpu-operator",
    "container": "nvidia-dcgm-exporter",
    "job": "dcgm",
    "instance": "10.0.0.7:9400",
}
#: --use-old-namespace
OLD = {
    **{k: v for k, v in LABELS.items() if k not in ("pod", "namespace", "container")},
    "pod_name": "jupyter-alice",
    "pod_namespace": "jhub",
    "container_name": "notebook",
}
PODS = {("jhub", "jupyter-alice"): ("alice", "")}


def one(metric: str, labels: dict[str, str], value: float) -> dict[str, Vector]:
    return {metric: Vector((Sample(labels, value),))}


#: honor_labels false, a target with a namespace label and no pod label: only the
#: namespace is renamed
MIXED = {**LABELS, "exported_namespace": "jhub", "namespace": "gpu-operator"}


@pytest.mark.parametrize(
    "labels", [LABELS, RENAMED, OLD, MIXED], ids=["pod", "exported_pod", "pod_name", "mixed"]
)
def test_each_label_shape_joins_to_the_server(labels: dict[str, str]) -> None:
    answers = {
        UTIL: Vector((Sample(labels, 40.0),)),
        GR_ACTIVE: Vector((Sample(labels, 0.5),)),
        POWER: Vector((Sample(labels, 300.0),)),
        ENERGY: Vector((Sample(labels, 18_000_000.0),)),
    }
    seen, refused = activities(answers, PODS, at=AT, window_s=60, max_gpus=8)
    assert refused == 0
    found = seen[("alice", "")]
    assert found.activity.gpu_util_pct == (50.0,)
    assert found.activity.power_w == 300.0
    assert found.activity.energy_j == 18_000.0
    assert found.nodes == ("gpu-node-1",)
    assert found.models == ("NVIDIA H100 80GB HBM3",)


def test_the_exporters_own_pod_and_other_namespaces_are_not_a_servers() -> None:
    # a GPU no pod holds, scraped with honor_labels false: only the exporter's pod label
    unassigned = {k: v for k, v in RENAMED.items() if not k.startswith("exported_")}
    other_ns = {**LABELS, "namespace": "other-hub"}
    answers = {UTIL: Vector((Sample(unassigned, 99.0), Sample(other_ns, 99.0)))}
    seen, _ = activities(answers, PODS, at=AT, window_s=60, max_gpus=8)
    assert seen == {}


@pytest.mark.parametrize(
    ("metric", "value"),
    [
        (UTIL, 150.0),
        (UTIL, -1.0),
        (GR_ACTIVE, 1.5),
        (POWER, 9223372036854775794.0),  # DCGM's "blank" value
        (POWER, -5.0),
        (ENERGY, 1e30),
    ],
)
def test_values_no_gpu_could_read_are_refused(metric: str, value: float) -> None:
    seen, refused = activities(one(metric, LABELS, value), PODS, at=AT, window_s=60, max_gpus=8)
    assert refused == 1
    assert seen == {}


def test_a_pod_with_thousands_of_gpus_is_bounded_to_the_most_a_server_can_have() -> None:
    samples = tuple(
        Sample({**LABELS, "UUID": f"GPU-{i}", "gpu": str(i)}, 50.0) for i in range(5000)
    )
    seen, refused = activities({UTIL: Vector(samples)}, PODS, at=AT, window_s=60, max_gpus=8)
    assert len(seen[("alice", "")].activity.gpu_util_pct) == 8
    assert refused == 4992


def test_the_queries_ask_for_either_namespace_label() -> None:
    asked = queries("jhub", 60)
    assert asked[UTIL] == (
        'avg_over_time(DCGM_FI_DEV_GPU_UTIL{exported_namespace="jhub"}[60s]) or '
        'avg_over_time(DCGM_FI_DEV_GPU_UTIL{pod_namespace="jhub"}[60s]) or '
        'avg_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="jhub"}[60s])'
    )
    assert queries("", 90.4)[ENERGY] == "increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[90s])"


# -- the split and the disagreement ------------------------------------------------------


def dcgm(*util: float, at: datetime = AT, window_s: float = 60) -> GpuActivity:
    return GpuActivity("dcgm", at=at, window_s=window_s, gpu_util_pct=tuple(util))


@settings(max_examples=500, deadline=None)
@given(
    st.integers(min_value=0, max_value=10**15),
    st.lists(st.floats(min_value=0, max_value=100), max_size=16),
    st.integers(min_value=0, max_value=16),
)
def test_the_split_adds_up_to_the_cost_exactly(cost: int, util: list[float], gpus: int) -> None:
    parts = split(cost, dcgm(*util) if util else None, gpus)
    assert parts.used + parts.idle + parts.unknown == cost
    assert min(parts.used, parts.idle, parts.unknown) >= 0
    if util and cost:
        n = max(gpus, len(util))
        exact_used = cost * sum(round(u * 100) for u in util) / (10_000 * n)
        assert abs(parts.used - exact_used) <= 1


def test_a_gpu_dcgm_does_not_see_is_unknown_not_idle() -> None:
    assert split(1_000_000, dcgm(100.0), 2) == split(1_000_000, dcgm(100.0), 2)
    parts = split(1_000_000, dcgm(100.0), 2)
    assert (parts.used, parts.idle, parts.unknown) == (500_000, 0, 500_000)
    assert split(1_000_000, None, 2).unknown == 1_000_000


def test_disagreement_beyond_the_tolerance_over_the_same_window() -> None:
    report = GpuActivity("report", at=AT, window_s=10, gpu_util_pct=(90.0, 90.0))
    flag = disagreement(dcgm(5.0, 5.0), report, 30)
    assert flag is not None
    assert (flag.report_pct, flag.dcgm_pct) == (90.0, 5.0)
    # and the other way round
    assert disagreement(
        dcgm(95.0), GpuActivity("report", at=AT, window_s=10, gpu_util_pct=(2.0,)), 30
    )
    # within the tolerance, or a report of another time, or naming no GPU: no flag
    assert disagreement(dcgm(70.0, 70.0), report, 30) is None
    old = GpuActivity("report", at=AT.replace(hour=10), window_s=10, gpu_util_pct=(90.0,))
    assert disagreement(dcgm(5.0), old, 30) is None
    assert disagreement(dcgm(5.0), GpuActivity("report", at=AT, window_s=10), 30) is None
    assert disagreement(dcgm(5.0), None, 30) is None


# -- settings ----------------------------------------------------------------------------


def hub(**values: Any) -> GpuCostHub:
    app = GpuCostHub()
    for name, value in values.items():
        setattr(app, name, value)
    return app


def test_off_unless_a_prometheus_url_is_set() -> None:
    assert hub().cluster_settings() is None


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"prometheus_url": "prometheus:9090"}, "prometheus_url"),
        ({"prometheus_namespace": "Not_A_Namespace"}, "prometheus_namespace"),
        ({"prometheus_interval_s": 1}, "prometheus_interval_s"),
        ({"prometheus_timeout_s": 600}, "prometheus_timeout_s"),
        ({"dcgm_tolerance_pct": 0}, "dcgm_tolerance_pct"),
        ({"pod_name_template": "jupyter-{userid}"}, "pod_name_template"),
        ({"prometheus_bearer_token_file": "/nonexistent/token"}, "prometheus_bearer_token_file"),
    ],
)
def test_a_setting_that_cannot_be_used_is_named(values: dict[str, Any], named: str) -> None:
    values.setdefault("prometheus_url", "http://prometheus:9090")
    with pytest.raises(HubConfigError, match=f"c.GpuCostHub.{named}"):
        hub(**values).cluster_settings()


def test_credentials_are_never_shown(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("hunter2-secret\n")
    config = hub(
        prometheus_url="https://admin:url-secret@prometheus.example:9090/prom",
        prometheus_username="gpucost",
        prometheus_password_file=str(secret),
    ).cluster_settings()
    assert config is not None
    text = repr(config) + repr(config.auth)
    assert "secret" not in text
    assert "gpucost" not in repr(config.auth)
    assert shown_url(config.url) == "https://prometheus.example:9090/prom"
    assert PrometheusAuth(username="u", password_file=str(secret)).header() == (
        "Basic dTpodW50ZXIyLXNlY3JldA=="
    )


def test_the_documented_settings_are_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    text = (Path(__file__).parent.parent / "docs" / "jupyterhub.md").read_text()
    section = text.split("## GPU use from the cluster's Prometheus (dcgm-exporter)", 1)[1]
    section = section.split("### Settings", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match
    (tmp_path / "gpucost_hub_config.py").write_text(match.group(1))
    monkeypatch.chdir(tmp_path)
    app = GpuCostHub()
    app.initialize([])
    config = app.cluster_settings()
    assert config is not None
    assert config.namespace == "jhub"
    assert config.pods.pod_name("alice", "gpu") == "jupyter-alice--gpu"
