"""The service configuration docs/jupyterhub.md shows is one the service accepts."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hub_service_fixture import SERVICE_SCOPES

from jupyter_gpucost.hub.app import GpuCostHub
from jupyter_gpucost.hub.model import ServerInfo

DOC = Path(__file__).parent.parent / "docs" / "jupyterhub.md"


def documented_service_config() -> str:
    text = DOC.read_text()
    section = text.split("### `gpucost_hub_config.py`", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "docs/jupyterhub.md has no gpucost_hub_config.py example"
    return match.group(1)


def test_the_documented_service_config_starts_and_prices_its_profiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gpucost_hub_config.py").write_text(documented_service_config())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "a-token")
    app = GpuCostHub()
    app.initialize([])
    parts = app.validate()
    try:
        started = datetime(2026, 11, 24, 9, tzinfo=UTC)
        a100 = parts.service.rate_for(ServerInfo("ann", "", started, True, profile="a100"))
        # the documented override: 2 A100-80GB at $3.20 each
        assert a100.allocation.count == 2
        assert a100.usd_per_hour == 2 * a100.usd_per_gpu_hour
        assert str(a100.usd_per_gpu_hour) == "3.20"
        other = parts.service.rate_for(ServerInfo("ann", "", started, True, profile="x"))
        assert other.allocation.model == "T4"
    finally:
        parts.service.ledger.close()


def documented_kubernetes_values() -> dict[str, Any]:
    text = DOC.read_text()
    section = text.split("## Zero to JupyterHub (Kubernetes)\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match, "docs/jupyterhub.md has no Zero to JupyterHub values.yaml example"
    values = yaml.safe_load(match.group(1))
    assert isinstance(values, dict)
    return values


def test_the_documented_kubernetes_values_start_the_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chart's values as documented: the service's config in ``hub.extraFiles``, its
    ``profiles_from`` the same values (where the chart mounts them), the cluster's
    Prometheus and an idle policy; checked by the service's own start-up checks."""
    values = documented_kubernetes_values()
    service = values["hub"]["services"]["gpucost"]
    mounted = values["hub"]["extraFiles"]["gpucost-config"]
    assert service["command"][-1] == mounted["mountPath"]
    config = mounted["stringData"]
    chart_values = "/usr/local/etc/jupyterhub/secret/values.yaml"
    assert chart_values in config
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    config = config.replace(chart_values, str(tmp_path / "values.yaml"))
    config = config.replace("/srv/jupyterhub/gpucost", str(tmp_path / "data"))
    (tmp_path / "gpucost_hub_config.py").write_text(config)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "a-token")
    # the scopes the service's role grants are the least it needs, as the tests' hub has
    assert values["hub"]["loadRoles"]["gpucost-service"]["scopes"] == SERVICE_SCOPES
    app = GpuCostHub()
    app.initialize([])
    parts = app.validate()
    try:
        started = datetime(2026, 11, 24, 9, tzinfo=UTC)

        def server(options: dict[str, object]) -> ServerInfo:
            profile = options.get("profile")
            return ServerInfo(
                "ann", "", started, True, profile if isinstance(profile, str) else None, options
            )

        # {} is the default profile: CPU only
        assert parts.service.rate_for(server({})).allocation.count == 0
        l4 = parts.service.rate_for(server({"profile": "l4"})).allocation
        assert (l4.model, l4.count) == ("L4", 1)
        two = parts.service.rate_for(server({"profile": "a100", "gpus": "two"})).allocation
        assert (two.model, two.count) == ("A100-40GB", 2)
        one = parts.service.rate_for(server({"profile": "a100"})).allocation
        assert one.count == 1
        # GPU use from the cluster's Prometheus, for the users' namespace
        assert parts.cluster is not None
        assert parts.cluster.namespace == "jhub"
        assert parts.cluster.url.startswith("http://prometheus-operated.monitoring.svc")
        # the idle policy, per profile
        reclaim = parts.service.reclaim
        assert reclaim is not None
        assert reclaim.enabled
        rule = reclaim.policy.rule_for(server({"profile": "a100", "gpus": "two"}))
        assert rule is not None
        assert rule.after_s == 30 * 60
        assert reclaim.policy.rule_for(server({"profile": "cpu"})) is None
        default = reclaim.policy.rule_for(server({"profile": "l4"}))
        assert default is not None
        assert default.after_s == 60 * 60
    finally:
        parts.service.ledger.close()
