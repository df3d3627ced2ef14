"""The server's settings are read once, by the app, into frozen settings per concern.

``c.GpuCost``'s traits are read by attribute in two places only: the extension app
(``server/app.py``) and its settings builder (``server/settings.py``), plus the validators
of the trait mixins themselves. Every part below takes a frozen settings object, so a part
cannot read a setting by name (``getattr(traits, "aws_spot_prices", True)``), copy its
default, read it at another moment than start-up, or write something back onto the app.
"""

from __future__ import annotations

import ast
import dataclasses
from decimal import Decimal
from pathlib import Path

import pytest
from traitlets import TraitError
from traitlets.config import Config

from jupyter_gpucost.server.app import GpuCost
from jupyter_gpucost.server.settings import ServerSettings, server_settings

SERVER = Path(__file__).resolve().parent.parent / "jupyter_gpucost" / "server"
#: the modules that read the traits: the app and its settings builder
READERS = {SERVER / "app.py", SERVER / "settings.py"}
#: names a part below the app would give the app or a traits object
HOLDERS = {"traits", "app", "gpucost", "extension", "extension_app"}


def _trait_names() -> set[str]:
    """The settings this package defines on ``c.GpuCost``."""
    return {
        name
        for name, trait in GpuCost.class_traits(config=True).items()
        if (getattr(getattr(trait, "this_class", None), "__module__", "") or "").startswith(
            "jupyter_gpucost"
        )
    }


TRAITS = _trait_names()


def _is_mixin(node: ast.ClassDef) -> bool:
    """A class of traits (``class BudgetTraits(HasTraits)``): its validators read them."""
    for base in node.bases:
        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
        if name == "HasTraits" or name.endswith("Traits"):
            return True
    return False


def _holder(node: ast.expr) -> bool:
    """``traits``, ``app``, ``self.app``: an expression naming the app or its traits."""
    if isinstance(node, ast.Name):
        return node.id in HOLDERS
    return isinstance(node, ast.Attribute) and node.attr in HOLDERS


def _annotation_names(node: ast.expr | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return set()
    return {
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    }


def findings(source: str, where: str) -> list[str]:
    """Each place where code below the app reads, takes or writes onto the traits."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.ClassDef) and _is_mixin(node):
            return  # a trait mixin: its own traits and validators
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
        ):
            name = node.args[1]
            if isinstance(name, ast.Constant) and (name.value in TRAITS or _holder(node.args[0])):
                found.append(f"{where}:{node.lineno}: {node.func.id}(…, {name.value!r})")
        if (
            isinstance(node, ast.Attribute)
            and _holder(node.value)
            and (node.attr in TRAITS or isinstance(node.ctx, ast.Store))
        ):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                names = _annotation_names(arg.annotation)
                # (the app itself cannot be imported below it: tests/test_import_contracts.py)
                if {"HasTraits", "ExtensionApp", "Configurable"} & names or any(
                    n.endswith("Traits") for n in names
                ):
                    found.append(f"{where}:{node.lineno}: {node.name}({arg.arg}) takes the traits")
        if isinstance(node, ast.Constant) and node.value == "GpuCost":
            found.append(f"{where}:{node.lineno}: reads the GpuCost config section")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source, where))
    return found


def test_no_part_below_the_app_reads_a_trait() -> None:
    found: list[str] = []
    for path in sorted(SERVER.rglob("*.py")):
        if path not in READERS:
            found += findings(path.read_text(), str(path.relative_to(SERVER.parent.parent)))
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        # what spot_prices.py did: a trait by string name, with a copy of its default
        'def f(plan, traits):\n    return bool(getattr(traits, "aws_spot_prices", True))\n',
        # a helper that reads any trait by name
        "def trait_str(traits: HasTraits, name: str) -> str:\n    return str(traits)\n",
        # attribute access on the app for a trait
        "def f(app):\n    return app.budget_action\n",
        # what startup.py did: a watch written back onto the app
        "def f(traits, watcher):\n    traits._interruption_watch = watcher\n",
        # the admin's config section read below the app
        'def f(config):\n    return config.get("GpuCost", {})\n',
    ],
)
def test_the_check_sees_a_trait_read_by_name(source: str) -> None:
    assert findings(source, "example.py") != []


def test_a_trait_mixins_own_validators_are_its_own() -> None:
    source = (
        "class SpotPriceTraits(HasTraits):\n"
        "    def _check(self, proposal):\n"
        "        return self.price_reread_interval_s\n"
    )
    assert findings(source, "example.py") == []


def _frozen(value: object) -> bool:
    params = getattr(type(value), "__dataclass_params__", None)
    return params is not None and bool(params.frozen)


def _build(config: dict[str, object], environ: dict[str, str] | None = None) -> ServerSettings:
    app = GpuCost(config=Config({"GpuCost": config}))
    return server_settings(app, app.config, "/srv/notebooks", environ or {}, hub=None)


def test_every_concern_gets_one_frozen_object(tmp_path: Path) -> None:
    settings = _build({"budget_state_path": str(tmp_path / "b.json")})
    assert _frozen(settings)
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        assert value is None or _frozen(value), field.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.budget.action = "interrupt"  # type: ignore[misc]


def test_what_the_admin_configures_is_what_the_parts_get(tmp_path: Path) -> None:
    settings = _build(
        {
            "hard_budget_usd": 12.5,
            "budget_action": "Interrupt",
            "budget_thresholds_pct": [80, 50],
            "export_on_budget_paths": ["ckpt"],
            "export_part_size_mb": 16,
            "notify_thresholds_pct": [100, 50],
            "notify_spike_factor": 0,
            "watch_interruptions": False,
            "aws_spot_prices": False,
            "price_reread_interval_s": 120,
            "detect_machine": False,
            "price_provider": "gcp",
            "price_overrides": {"A100-80GB": "2.10"},
            "minimum_charge_s": 0,
        }
    )
    assert settings.budget.hard is not None
    assert settings.budget.hard.amount_micro == 12_500_000
    assert settings.budget.action == "interrupt"
    assert settings.budget.thresholds_pct == (50, 80)
    assert settings.export.root_dir == "/srv/notebooks"
    assert settings.export.tuning.part_size_bytes == 16 * 1024 * 1024
    assert settings.export_on_budget.paths == ("ckpt",)
    assert settings.notify.thresholds_pct == (50, 100)
    assert settings.notify.spike_factor == 0
    assert settings.interruption.watch is False
    assert settings.pricing.spot.aws_spot_prices is False
    assert settings.pricing.spot.reread_interval_s == 120
    assert settings.pricing.rates.interval_s == 120
    assert settings.pricing.admin.provider == "gcp"
    assert settings.pricing.admin.market is None  # not set by the admin
    assert settings.pricing.provider == "gcp"
    assert settings.pricing.overrides == {"A100-80GB": Decimal("2.10")}
    assert settings.pricing.minimum_charge_s == 0
    assert settings.machine.detect is False


def test_the_spawners_budget_is_checked_once_and_named(tmp_path: Path) -> None:
    with pytest.raises(TraitError, match="GPUCOST_BUDGET_USD='lots' is not valid"):
        _build({}, {"GPUCOST_BUDGET_USD": "lots"})
    # a valid one is the floor the config can only make stricter
    settings = _build(
        {"hard_budget_usd": 3, "budget_action": "stop-server"},
        {"GPUCOST_BUDGET_USD": "5", "GPUCOST_BUDGET_ACTION": "stop-instance"},
    )
    assert settings.budget.hard is not None
    assert settings.budget.hard.amount_micro == 3_000_000
    assert settings.budget.action == "stop-instance"
    # EC2 is asked whether a Spot Instance can stop only where the action would stop it
    assert settings.machine.check_spot_stop is True
