"""Export targets: a configured name → an fsspec-style URL and its storage options.

The admin configures targets (``c.GpuCost.export_targets``); the browser only ever sees
their names, kinds and credential-free URLs. Storage options (endpoints, keys, profiles)
stay in the server and are never logged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ...core.i18n import _
from ...core.refusal import Refusal
from ..inputs import shown, type_name

#: the URL schemes an export can go to, and the Python extra each needs
SCHEMES = {
    "file": None,
    "s3": "s3",
    "s3a": "s3",
    "gs": "gcs",
    "gcs": "gcs",
}
DEFAULT_NAME = "local"


class ExportTargetError(ValueError):
    """A configured target is not valid; the message says what to do. (A target a request
    names and may not have is a :class:`~jupyter_gpucost.core.refusal.Refusal`.)"""


@dataclass(frozen=True)
class ExportTarget:
    name: str
    url: str
    #: storage options for the store (endpoint, credentials, ...): never sent or logged
    options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    label: str = ""

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme

    @property
    def kind(self) -> str:
        return {"file": "local", "s3a": "s3", "gcs": "gs"}.get(self.scheme, self.scheme)

    @property
    def public_url(self) -> str:
        """The URL without any user:password part (safe to show)."""
        return public_url(self.url)

    def public(self, default: str) -> dict[str, object]:
        return {
            "name": self.name,
            "label": self.label or self.name,
            "kind": self.kind,
            "url": self.public_url,
            "default": self.name == default,
        }


def public_url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def normalise_url(url: str, *, what: str) -> str:
    """Check a target URL; local paths become ``file://`` URLs."""
    url = str(url).strip()
    if not url:
        raise ExportTargetError(f"{what}: the URL is empty")
    if "://" not in url:
        if not os.path.isabs(os.path.expanduser(url)):
            raise ExportTargetError(
                f"{what} = {url!r}: use an absolute folder or a URL "
                "(file:///..., s3://bucket/prefix, gs://bucket/prefix)"
            )
        return Path(os.path.expanduser(url)).resolve().as_uri()
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ExportTargetError(
            f"{what} = {public_url(url)!r}: the scheme {parts.scheme!r} is not supported; "
            f"use one of {', '.join(s + '://' for s in SCHEMES)}"
        )
    if parts.query or parts.fragment:
        raise ExportTargetError(
            f"{what} = {public_url(url)!r}: a target URL takes no ?query or #part"
        )
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ExportTargetError(f"{what} = {url!r}: a file:// URL names a local folder")
        return Path(parts.path).resolve().as_uri()
    if not parts.netloc:
        raise ExportTargetError(f"{what} = {public_url(url)!r}: the URL names no bucket")
    return url.rstrip("/")


def parse_targets(raw: dict[str, Any], *, local_default: Path) -> dict[str, ExportTarget]:
    """The configured targets, with the local default added when not overridden.

    ``raw`` maps a name to a URL string or to ``{"url": ..., "options": {...},
    "label": ...}`` (``storage_options`` is accepted for ``options``).
    """
    targets: dict[str, ExportTarget] = {}
    for name, spec in raw.items():
        what = f"c.GpuCost.export_targets[{name!r}]"
        if not isinstance(name, str) or not name.strip() or "/" in name:
            raise ExportTargetError(f"{what}: a target name is a non-empty word without '/'")
        if isinstance(spec, str):
            spec = {"url": spec}
        if not isinstance(spec, dict) or "url" not in spec:
            raise ExportTargetError(
                f"{what}: give a URL, or {{'url': ..., 'options': {{...}}}} (storage options)"
            )
        unknown = set(spec) - {"url", "options", "storage_options", "label"}
        if unknown:
            raise ExportTargetError(
                f"{what}: unknown key(s) {', '.join(sorted(unknown))}; use url, options and label"
            )
        options = spec.get("options", spec.get("storage_options", {})) or {}
        if not isinstance(options, dict):
            raise ExportTargetError(f"{what}['options']: storage options are a dict")
        url = normalise_url(spec["url"], what=what)
        targets[name] = ExportTarget(name, url, dict(options), str(spec.get("label", "")))
    if DEFAULT_NAME not in targets:
        targets[DEFAULT_NAME] = ExportTarget(
            DEFAULT_NAME, local_default.resolve().as_uri(), {}, "Local folder"
        )
    return targets


def choose_default(targets: dict[str, ExportTarget], configured: str) -> str:
    if not configured:
        # the one configured target, else the local folder
        others = [n for n in targets if n != DEFAULT_NAME]
        return others[0] if len(others) == 1 else DEFAULT_NAME
    if configured not in targets:
        raise ExportTargetError(
            f"c.GpuCost.export_default_target = {configured!r} is not a configured target: "
            f"use one of {', '.join(sorted(targets))}"
        )
    return configured


def resolve(
    targets: dict[str, ExportTarget], default: str, requested: str | None, *, allow_urls: bool
) -> ExportTarget:
    """The target a request names (its default when none); free URLs only if allowed."""
    if requested is None or requested == "":
        return targets[default]
    if not isinstance(requested, str):
        raise Refusal(
            _("target must be the name of a configured target, not {what}").format(
                what=type_name(requested)
            )
        )
    if requested in targets:
        return targets[requested]
    if "://" in requested:
        if not allow_urls:
            text = _(
                "exports go to configured targets only ({names}); the administrator can "
                "allow free URLs with c.GpuCost.export_allow_urls"
            )
            raise Refusal(text.format(names=", ".join(sorted(targets))), HTTPStatus.FORBIDDEN)
        public = public_url(requested)
        try:
            url = normalise_url(requested, what="target")
        except ExportTargetError as e:
            raise Refusal(str(e)) from None
        return ExportTarget(public, url, {})
    text = _("there is no export target {name}: use one of {names}")
    raise Refusal(text.format(name=shown(requested), names=", ".join(sorted(targets))))


def missing_extra(target: ExportTarget) -> str | None:
    """A message when the Python packages a target needs are not installed."""
    extra = SCHEMES.get(target.scheme)
    if extra == "s3":
        try:
            import boto3  # noqa: F401
        except ImportError:
            text = _("the target {name} needs boto3: pip install 'jupyter-gpucost[s3]'")
            return text.format(name=repr(target.name))
    if extra == "gcs":
        try:
            import gcsfs  # noqa: F401
        except ImportError:
            text = _("the target {name} needs gcsfs: pip install 'jupyter-gpucost[gcs]'")
            return text.format(name=repr(target.name))
    return None
