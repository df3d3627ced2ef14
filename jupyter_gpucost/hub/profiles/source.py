"""Read KubeSpawner's ``profile_list`` from the hub's own config, without running it.

``c.GpuCostHub.profiles_from`` names one of:

* Zero to JupyterHub values files (``.yaml``/``.yml``), one or several merged in Helm's
  order (``-f common.yaml -f prod.yaml``: maps merge deeply, lists and other values are
  replaced, ``null`` removes a key; anchors and aliases resolved). The chart's values are
  looked for at the top and under any ``jupyterhub`` key (an umbrella chart such as
  ``daskhub`` or a provider's base chart: ``jupyterhub.``, ``basehub.jupyterhub.``):
  ``singleuser.profileList``, or ``hub.config.KubeSpawner.profile_list`` (which Z2JH
  applies last, so it wins). No profile list anywhere is a :class:`HubConfigError` naming
  every path looked at (never "no profiles"), and so are two hubs' lists in one file; the
  spawner's own GPU settings from ``singleuser.nodeSelector``,
  ``singleuser.extraResource.limits``/``guarantees``,
  ``singleuser.extraNodeAffinity.required`` and ``hub.config.KubeSpawner.*``. A
  ``hub.extraConfig`` snippet that mentions ``profile_list`` is Python the service does
  not run: the list is then unreadable, and the service says so;
* a ``jupyterhub_config.py``: read with :mod:`ast`, never executed (a hub config may
  read secrets, call the Kubernetes API or import the hub's own modules). Top-level
  ``c.KubeSpawner.profile_list = ...`` (and ``c.KubeSpawner.node_selector = ...`` etc.)
  whose values are literals, or names bound at top level to literals, are read; a
  ``lambda``, a function, a call, or an assignment inside a block is
  :class:`~.kube_profiles.Unreadable`: a callable ``profile_list`` cannot be read
  statically, and a callable ``kubespawner_override`` value makes only the profile that
  has it unpriceable.

Blocking file I/O: called once at start (and by ``check-profiles``).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from ..model import HubConfigError
from .kubespawner import DICT_SETTINGS, GPU_SETTINGS, LIST_SETTINGS, Unreadable
from .table import ProfileSource

SETTING = "c.GpuCostHub.profiles_from"
#: Z2JH's singleuser keys that become the spawner's GPU settings
_Z2JH_BASE = (
    (("nodeSelector",), "node_selector"),
    (("extraResource", "limits"), "extra_resource_limits"),
    (("extraResource", "guarantees"), "extra_resource_guarantees"),
    (("extraNodeAffinity", "required"), "node_affinity_required"),
)
_MAX_BYTES = 5_000_000
#: how deep under umbrella charts a ``jupyterhub`` key is looked for
_MAX_DEPTH = 4
_PROFILE_LIST = "singleuser.profileList"
_HUB_PROFILE_LIST = "hub.config.KubeSpawner.profile_list"


def read(paths: str | Sequence[str], setting: str = SETTING) -> ProfileSource:
    """The profile list at ``paths`` (several values files are merged in Helm's order,
    the last winning); :class:`HubConfigError` naming ``setting``."""
    if isinstance(paths, str):
        paths = [paths]
    if not paths:
        raise HubConfigError(f"{setting}: no file named")
    texts: list[tuple[str, str]] = []
    for path in paths:
        texts.append((path, _text(path, setting)))
    if len(texts) == 1 and texts[0][0].endswith(".py"):
        return from_python(texts[0][1], texts[0][0], setting)
    python = [p for p, _ in texts if p.endswith(".py")]
    if python:
        raise HubConfigError(
            f"{setting}: {python[0]!r} is a jupyterhub_config.py; only values files "
            "(.yaml, .yml) are merged"
        )
    merged: dict[str, object] = {}
    for path, text in texts:
        merged = helm_merge(merged, _load_values(text, path, setting))
    return from_tree(merged, " + ".join(paths), setting)


def _text(path: str, setting: str) -> str:
    file = Path(path)
    if file.suffix not in (".yaml", ".yml", ".py"):
        raise HubConfigError(
            f"{setting} = {path!r}: use a Zero to JupyterHub values.yaml (.yaml, .yml) or a "
            "jupyterhub_config.py (.py)"
        )
    try:
        if file.stat().st_size > _MAX_BYTES:
            raise HubConfigError(f"{setting} = {path!r}: larger than {_MAX_BYTES} bytes")
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise HubConfigError(f"{setting} = {path!r} cannot be read: {e}") from None


def _get(tree: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(tree, Mapping) or key not in tree:
            return None
        tree = tree[key]
    return tree


def _load_values(text: str, path: str, setting: str) -> Mapping[str, object]:
    try:
        # safe_load resolves anchors and aliases (``&init_containers`` / ``*init_containers``)
        values = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise HubConfigError(f"{setting} = {path!r} is not valid YAML: {e}") from None
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise HubConfigError(f"{setting} = {path!r}: a values.yaml is a mapping")
    return values


def helm_merge(base: Mapping[str, object], new: Mapping[str, object]) -> dict[str, object]:
    """Helm's merge of ``-f base -f new``: maps merge deeply, anything else (lists
    included) is replaced by the later file, and ``null`` removes the key."""
    out: dict[str, object] = dict(base)
    for key, value in new.items():
        old = out.get(key)
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(old, Mapping):
            out[key] = helm_merge(old, value)
        else:
            out[key] = value
    return out


def from_values(text: str, path: str, setting: str = SETTING) -> ProfileSource:
    """A Z2JH ``values.yaml``."""
    return from_tree(_load_values(text, path, setting), path, setting)


def _chart_roots(tree: Mapping[str, object], prefix: str = "", depth: int = 0) -> list[str]:
    """Where a Z2JH chart's values may sit: the top, and under any ``jupyterhub`` key
    (an umbrella chart: ``jupyterhub.``, ``daskhub.jupyterhub.``, ``basehub.jupyterhub.``)."""
    roots = [prefix] if depth == 0 else []
    if depth >= _MAX_DEPTH:
        return roots
    for key, value in tree.items():
        if not isinstance(key, str) or not isinstance(value, Mapping):
            continue
        inner = f"{prefix}{key}."
        if key == "jupyterhub":
            roots.append(inner)
        roots += _chart_roots(value, inner, depth + 1)
    return roots


def _at(tree: Mapping[str, object], root: str) -> object:
    return _get(tree, *[k for k in root.split(".") if k]) if root else tree


def from_tree(values: Mapping[str, object], path: str, setting: str = SETTING) -> ProfileSource:
    """The profile list of (merged) values, wherever Helm would put it."""
    roots = _chart_roots(values)
    looked: list[str] = []
    found: list[tuple[str, ProfileSource]] = []
    for root in roots:
        chart = _at(values, root)
        if not isinstance(chart, Mapping):
            continue
        looked += [f"{root}{_PROFILE_LIST}", f"{root}{_HUB_PROFILE_LIST}"]
        source = _from_chart(chart, root, path)
        if source is not None:
            found.append((root, source))
    if len(found) > 1:
        raise HubConfigError(
            f"{setting} = {path!r}: profile lists at "
            f"{', '.join(s.origin for _, s in found)}; Helm installs one hub per release: "
            "name the values of the hub to price"
        )
    if not found:
        raise HubConfigError(
            f"{setting} = {path!r}: no profile list found; looked at {', '.join(looked)}. "
            "A hub with one server type: set c.GpuCostHub.profile_gpus or default_gpu instead"
        )
    return found[0][1]


def _from_chart(chart: Mapping[str, object], root: str, path: str) -> ProfileSource | None:
    """One chart's profile list and base settings; ``None`` when it has none."""
    base: dict[str, object] = {}
    for keys, name in _Z2JH_BASE:
        value = _get(chart, "singleuser", *keys)
        if value is not None:
            base[name] = value
    origin = f"{path} {root}{_PROFILE_LIST}"
    profiles = _get(chart, "singleuser", "profileList")
    hub_config = _get(chart, "hub", "config", "KubeSpawner")
    if isinstance(hub_config, Mapping):
        for name in GPU_SETTINGS:
            if name in hub_config:
                base[name] = hub_config[name]
        if "profile_list" in hub_config:
            profiles = hub_config["profile_list"]
            origin = f"{path} {root}{_HUB_PROFILE_LIST}"
    extra = _get(chart, "hub", "extraConfig")
    if isinstance(extra, Mapping):
        for name, snippet in extra.items():
            if isinstance(snippet, str) and "profile_list" in snippet:
                profiles = Unreadable(f"set in Python by {root}hub.extraConfig.{name}")
                origin = f"{path} {root}hub.extraConfig.{name}"
    if profiles is None:
        return None
    return ProfileSource(origin=origin, profiles=profiles, base=base)


def from_python(text: str, path: str, setting: str = SETTING) -> ProfileSource:
    """A ``jupyterhub_config.py``, read statically."""
    try:
        tree = ast.parse(text, path)
    except SyntaxError as e:
        raise HubConfigError(f"{setting} = {path!r}: not valid Python: {e}") from None
    reader = _Reader(text)
    found: dict[str, object] = {}
    for statement in tree.body:
        reader.visit_top(statement, found)
    # a setting written anywhere but at the top level (in an if, a function...) is code
    for node in ast.walk(tree):
        if node in reader.top_nodes:
            continue
        for name in _targets(node):
            line = getattr(node, "lineno", 0)
            found[name] = Unreadable(f"set at line {line} by code the service does not run")
    # c.KubeSpawner handed to code (Z2JH's set_config_if_not_none(c.KubeSpawner, ...),
    # setattr, c["KubeSpawner"]): what it sets there is not known
    handed = _handed_over(tree)
    if handed:
        for name in ("profile_list", *DICT_SETTINGS, *LIST_SETTINGS):
            if name not in found:
                found[name] = Unreadable(f"possibly set by {handed}")
    base = {k: v for k, v in found.items() if k in GPU_SETTINGS}
    if "profile_list" not in found:
        raise HubConfigError(
            f"{setting} = {path!r}: no profile list found; looked at top-level "
            "c.KubeSpawner.profile_list. A hub with one server type: set "
            "c.GpuCostHub.profile_gpus or default_gpu instead"
        )
    return ProfileSource(
        origin=f"{path} c.KubeSpawner.profile_list",
        profiles=found["profile_list"],
        base=base,
    )


def _handed_over(tree: ast.Module) -> str:
    """Where the config gives ``c.KubeSpawner`` (or ``c`` itself) to code, if it does."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if _is_c(arg) or (
                    isinstance(arg, ast.Attribute)
                    and arg.attr == "KubeSpawner"
                    and _is_c(arg.value)
                ):
                    return f"the call at line {node.lineno}"
        if isinstance(node, ast.Subscript) and _is_c(node.value):
            return f"c[...] at line {node.lineno}"
    return ""


def _is_c(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "c"


def _kubespawner_setting(target: ast.expr) -> str | None:
    """``profile_list`` for ``c.KubeSpawner.profile_list``."""
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Attribute)
        and target.value.attr == "KubeSpawner"
        and isinstance(target.value.value, ast.Name)
        and target.value.value.id == "c"
        and (target.attr == "profile_list" or target.attr in GPU_SETTINGS)
    ):
        return target.attr
    return None


def _targets(node: ast.AST) -> list[str]:
    """The KubeSpawner settings a statement sets or changes."""
    names: list[str] = []
    if isinstance(node, ast.Assign):
        for target in node.targets:
            name = _kubespawner_setting(target)
            if name:
                names.append(name)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        name = _kubespawner_setting(node.target)
        if name:
            names.append(name)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        # c.KubeSpawner.profile_list.append(...), .update(...)
        name = _kubespawner_setting(node.func.value)
        if name:
            names.append(name)
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
        # c.KubeSpawner.node_selector["..."] = ...
        name = _kubespawner_setting(node.value)
        if name:
            names.append(name)
    return names


class _Reader:
    """Literal values of top-level statements; everything else :class:`Unreadable`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.names: dict[str, object] = {}
        self.top_nodes: set[ast.AST] = set()

    def visit_top(self, node: ast.stmt, found: dict[str, object]) -> None:
        if isinstance(node, ast.Assign):
            value = self.value(node.value)
            for target in node.targets:
                self.top_nodes.add(node)
                name = _kubespawner_setting(target)
                if name:
                    found[name] = value
                elif isinstance(target, ast.Name):
                    self.names[target.id] = value
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self.names[node.name] = Unreadable(f"the function {node.name}() (a callable)")
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            for name in _targets(node.value):
                self.top_nodes.add(node.value)
                found[name] = Unreadable(f"changed at line {node.lineno} by a call")
            func = node.value.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                # profiles.append(...): the name, and a setting bound to it, are code now
                changed = self.names.get(func.value.id)
                gone = Unreadable(f"{func.value.id} changed at line {node.lineno} by a call")
                if func.value.id in self.names:
                    self.names[func.value.id] = gone
                for name, value in list(found.items()):
                    if changed is not None and value is changed:
                        found[name] = gone

    def value(self, node: ast.expr) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List | ast.Tuple):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            out: dict[object, object] = {}
            for k, v in zip(node.keys, node.values, strict=True):
                if k is None:  # {**other}
                    return Unreadable(f"{self._source(node)} (a ** expansion)")
                key = self.value(k)
                if isinstance(key, Unreadable | list | dict):
                    return Unreadable(self._source(node))
                out[key] = self.value(v)
            return out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.value(node.operand)
            if isinstance(inner, int | float) and not isinstance(inner, bool):
                return -inner
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.names[node.id]
            return Unreadable(f"the name {node.id} (not a literal)")
        if isinstance(node, ast.Lambda):
            return Unreadable(f"a lambda at line {node.lineno} (a callable)")
        return Unreadable(f"{self._source(node)} at line {node.lineno} (code)")

    def _source(self, node: ast.expr) -> str:
        text = ast.get_source_segment(self.text, node) or type(node).__name__
        return text if len(text) <= 60 else text[:57] + "..."
