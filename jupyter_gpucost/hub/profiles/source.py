"""Read KubeSpawner's ``profile_list`` from the hub's own config, without running it.

``c.GpuCostHub.profiles_from`` names one of:

* a Zero to JupyterHub ``values.yaml`` (``.yaml``/``.yml``): ``singleuser.profileList``,
  or ``hub.config.KubeSpawner.profile_list`` (which Z2JH applies last, so it wins); the
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
from collections.abc import Mapping
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


def read(path: str, setting: str = SETTING) -> ProfileSource:
    """The profile list at ``path``; :class:`HubConfigError` naming ``setting``."""
    file = Path(path)
    if file.suffix not in (".yaml", ".yml", ".py"):
        raise HubConfigError(
            f"{setting} = {path!r}: use a Zero to JupyterHub values.yaml (.yaml, .yml) or a "
            "jupyterhub_config.py (.py)"
        )
    try:
        if file.stat().st_size > _MAX_BYTES:
            raise HubConfigError(f"{setting} = {path!r}: larger than {_MAX_BYTES} bytes")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise HubConfigError(f"{setting} = {path!r} cannot be read: {e}") from None
    if file.suffix in (".yaml", ".yml"):
        return from_values(text, path, setting)
    return from_python(text, path, setting)


def _get(tree: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(tree, Mapping) or key not in tree:
            return None
        tree = tree[key]
    return tree


def from_values(text: str, path: str, setting: str = SETTING) -> ProfileSource:
    """A Z2JH ``values.yaml``."""
    try:
        values = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise HubConfigError(f"{setting} = {path!r} is not valid YAML: {e}") from None
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise HubConfigError(f"{setting} = {path!r}: a values.yaml is a mapping")
    base: dict[str, object] = {}
    for keys, name in _Z2JH_BASE:
        value = _get(values, "singleuser", *keys)
        if value is not None:
            base[name] = value
    origin = f"{path} singleuser.profileList"
    profiles = _get(values, "singleuser", "profileList")
    hub_config = _get(values, "hub", "config", "KubeSpawner")
    if isinstance(hub_config, Mapping):
        for name in GPU_SETTINGS:
            if name in hub_config:
                base[name] = hub_config[name]
        if "profile_list" in hub_config:
            profiles = hub_config["profile_list"]
            origin = f"{path} hub.config.KubeSpawner.profile_list"
    extra = _get(values, "hub", "extraConfig")
    if isinstance(extra, Mapping):
        for name, snippet in extra.items():
            if isinstance(snippet, str) and "profile_list" in snippet:
                profiles = Unreadable(f"set in Python by hub.extraConfig.{name}")
                origin = f"{path} hub.extraConfig.{name}"
    return ProfileSource(origin=origin, profiles=profiles or [], base=base)


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
    return ProfileSource(
        origin=f"{path} c.KubeSpawner.profile_list",
        profiles=found.get("profile_list", []),
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
