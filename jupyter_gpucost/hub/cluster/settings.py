"""The service's settings for the cluster's Prometheus (``c.GpuCostHub.prometheus_*``), and
the frozen :class:`ClusterSettings` built from them once, at start.

Off unless ``prometheus_url`` is set. Every value is checked at start; one that cannot be
used stops the service with one line naming it. Secrets are read from files, never kept in
a setting's value, so they never show in a log or a page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from traitlets import Enum, Float, HasTraits, Unicode

from ..model import HubConfigError
from ..profiles.podname import DEFAULT_TEMPLATE, PodNames, SlugScheme
from .dcgm import NAMESPACE
from .prometheus import PrometheusAuth, shown_url

SETTING = "c.GpuCostHub"

#: (low, high, accepted) of each number setting
RANGES: dict[str, tuple[float, float, str]] = {
    "prometheus_interval_s": (5, 3_600, "seconds from 5 to 3600"),
    "prometheus_timeout_s": (0.5, 60, "seconds from 0.5 to 60"),
    "dcgm_tolerance_pct": (1, 100, "percentage points from 1 to 100"),
}
#: the longest window one poll asks about; older unclassified time stays unknown
MAX_WINDOW_S = 900.0


class ClusterTraits(HasTraits):
    """``c.GpuCostHub`` settings for GPU use from the cluster's Prometheus."""

    prometheus_url = Unicode(
        "",
        config=True,
        help="The cluster's Prometheus (e.g. http://prometheus-operated.monitoring:9090), "
        "which scrapes NVIDIA's dcgm-exporter; empty: GPU use is not read from the cluster.",
    )
    prometheus_namespace = Unicode(
        "",
        config=True,
        help="The Kubernetes namespace of the users' pods (KubeSpawner's namespace); "
        "empty: pods of that name in any namespace.",
    )
    prometheus_interval_s = Float(
        60.0, config=True, help="How often Prometheus is asked (seconds; the window of each query)."
    )
    prometheus_timeout_s = Float(
        5.0, config=True, help="How long one query may take before Prometheus counts as down."
    )
    prometheus_bearer_token_file = Unicode(
        "",
        config=True,
        help="A file holding a bearer token for Prometheus (re-read at each query).",
    )
    prometheus_username = Unicode("", config=True, help="A user name for Prometheus's basic auth.")
    prometheus_password_file = Unicode(
        "", config=True, help="A file holding the basic auth password."
    )
    dcgm_tolerance_pct = Float(
        30.0,
        config=True,
        help="How far (percentage points of mean GPU utilisation) a server's own report may "
        "be from dcgm-exporter's over the same window before the admin page flags it.",
    )
    pod_name_template = Unicode(
        DEFAULT_TEMPLATE,
        config=True,
        help="KubeSpawner's pod_name_template, to find each server's pod "
        "(KubeSpawner 7: jupyter-{user_server}; before 7: jupyter-{username}--{servername}).",
    )
    pod_slug_scheme = Enum(
        ["safe", "escape"],
        "safe",
        config=True,
        help="KubeSpawner's slug_scheme: 'safe' (KubeSpawner 7) or 'escape' (before 7).",
    )

    def cluster_settings(self) -> ClusterSettings | None:
        """The checked settings, or None when ``prometheus_url`` is not set."""
        if not self.prometheus_url:
            return None
        for name, (low, high, accepted) in RANGES.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise HubConfigError(f"{SETTING}.{name} = {value!r} is not valid: use {accepted}")
        parts = urlsplit(self.prometheus_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HubConfigError(
                f"{SETTING}.prometheus_url = {shown_url(self.prometheus_url)!r} is not valid: "
                "use an http(s) URL such as http://prometheus-operated.monitoring:9090"
            )
        if self.prometheus_namespace and not NAMESPACE.match(self.prometheus_namespace):
            raise HubConfigError(
                f"{SETTING}.prometheus_namespace = {self.prometheus_namespace!r} is not a "
                "Kubernetes namespace"
            )
        for name in ("prometheus_bearer_token_file", "prometheus_password_file"):
            path = getattr(self, name)
            if path and not Path(path).is_file():
                raise HubConfigError(f"{SETTING}.{name} = {path!r}: no such file")
        if self.prometheus_bearer_token_file and self.prometheus_username:
            raise HubConfigError(
                f"{SETTING}.prometheus_bearer_token_file and prometheus_username: set one"
            )
        if self.prometheus_password_file and not self.prometheus_username:
            raise HubConfigError(
                f"{SETTING}.prometheus_password_file needs {SETTING}.prometheus_username"
            )
        scheme: SlugScheme = "escape" if self.pod_slug_scheme == "escape" else "safe"
        try:
            pods = PodNames(self.pod_name_template, scheme)
        except ValueError as e:
            raise HubConfigError(f"{SETTING}.pod_name_template: {e}") from None
        return ClusterSettings(
            url=self.prometheus_url,
            namespace=self.prometheus_namespace,
            interval_s=float(self.prometheus_interval_s),
            timeout_s=float(self.prometheus_timeout_s),
            auth=PrometheusAuth(
                self.prometheus_bearer_token_file,
                self.prometheus_username,
                self.prometheus_password_file,
            ),
            tolerance_pct=float(self.dcgm_tolerance_pct),
            pods=pods,
        )


@dataclass(frozen=True)
class ClusterSettings:
    url: str
    namespace: str
    interval_s: float
    timeout_s: float
    auth: PrometheusAuth
    tolerance_pct: float
    pods: PodNames
    max_window_s: float = MAX_WINDOW_S

    def __repr__(self) -> str:
        return f"ClusterSettings({shown_url(self.url)!r}, namespace={self.namespace!r})"
