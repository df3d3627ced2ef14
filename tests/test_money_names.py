"""Money names true to the currency: inside the package, ``usd`` only where it is true.

An amount of the session (USD, CNY, EUR...) is named for what it is — ``*_micro``,
``per_hour``, ``per_gpu_hour``, ``to_units`` — never for a currency it may not be in. A name
of the package (a function or its parameter, a class's field or attribute, a module's name)
that says ``usd`` is allowed only where the amount really is US dollars, or where the name is seen
from outside (a configuration trait, a key written to a file, a notebook or the wire, a
deprecated alias kept for notebooks written before): each such place is listed below with
its reason. A name left to rename later is listed too, with why it waits.
"""

from __future__ import annotations

import ast
import re
from decimal import Decimal
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jupyter_gpucost"

#: module (or a room, ending in "/") -> (the names that may say usd there, why)
TRUE_OR_SEEN: dict[str, tuple[frozenset[str], str]] = {
    "hub/": (
        frozenset({"*"}),
        "the hub's ledger is in US dollars (hub/ledger LEDGER_CURRENCY = 'USD'), its rates, "
        "budgets, pages and metrics with it",
    ),
    "cloud/azure_prices.py": (
        frozenset({"usd_per_hour"}),
        "the Azure Retail Prices API publishes its prices in US dollars",
    ),
    "cloud/spot_prices.py": (
        frozenset({"usd_per_hour"}),
        "AWS DescribeSpotPriceHistory answers in US dollars",
    ),
    "core/catalog_file.py": (
        frozenset({"usd_key"}),
        "the catalog's TOML key of a price in US dollars (usd_per_gpu_hour, usd_per_hour)",
    ),
    "core/billed_rate.py": (
        frozenset({"usd_per_hour", "parse_usd_per_hour"}),
        "Vast.ai, RunPod and Lambda bill their rentals in US dollars (the plan priced at a "
        "billed rate is in USD)",
    ),
    "core/hub_protocol.py": (
        frozenset({"*"}),
        "the report protocol to the hub: its keys, into the hub's ledger in US dollars",
    ),
    "core/wire_report.py": (
        frozenset({"*"}),
        "the report protocol's documents: TypedDict keys are the wire's",
    ),
    "core/wire.py": (
        frozenset({"*"}),
        "the HTTP documents' TypedDicts: the deprecated _usd keys beside the neutral ones "
        "(docs/api.md, 'Money keys')",
    ),
    "headless/ledger.py": (
        frozenset({"cost_micro_usd", "rate_usd_per_hour"}),
        "the headless runner's ledger file: its entries' keys",
    ),
    "kernel/cell/measure.py": (
        frozenset({"cost_usd", "cost_micro_usd", "rate_usd_per_hour"}),
        "deprecated read-only aliases on the CellCost a notebook keeps with -o NAME "
        "(docs/magic.md)",
    ),
    "kernel/guard.py": (
        frozenset({"budget_usd", "usd_per_hour"}),
        "the guard's keyword arguments, which notebooks pass (docs/magic.md)",
    ),
    "kernel/guard_callbacks.py": (
        frozenset({"budget_usd", "usd_per_hour"}),
        "the trainer callbacks' keyword arguments, which notebooks pass (docs/magic.md)",
    ),
    "kernel/training/old_names.py": (
        frozenset(
            {
                "budget_usd",
                "usd_per_hour",
                "spent_usd",
                "usd_per_step",
                "usd_per_1k_tokens",
                "projected_usd",
            }
        ),
        "deprecated read-only aliases a notebook reads on the guard and its summary "
        "(docs/magic.md)",
    ),
    "kernel/widgets.py": (
        frozenset({"budget_usd", "usd_per_hour", "total_usd", "rate_usd_per_hour"}),
        "the ticker's keyword arguments (budget_usd=, usd_per_hour=) and the deprecated "
        "read-only aliases a notebook reads on it (docs/magic.md)",
    ),
    "server/traits.py": (
        frozenset({"base_price_usd_per_hour", "unknown_gpu_usd_per_hour"}),
        "c.GpuCost traits: an admin's config names them",
    ),
    "server/budget/traits.py": (
        frozenset({"hard_budget_usd"}),
        "a c.GpuCost trait: an admin's config names it",
    ),
    "server/budget/setup.py": (
        frozenset({"hard_budget_usd"}),
        "the value of c.GpuCost.hard_budget_usd and of GPUCOST_BUDGET_USD, by the trait's name",
    ),
    "server/budget/record.py": (
        frozenset({"still_usd_per_hour"}),
        "the last action's record as the state file keeps it (docs/budgets.md)",
    ),
    "core/saved_cost.py": (
        frozenset({"*"}),
        "the cost saved in a notebook (metadata.gpucost), a file format: its fields are its "
        "keys, in the record's currency (docs/headless.md)",
    ),
    "core/record_rules.py": (
        frozenset({"rate_usd_per_hour"}),
        "a cell's record, by its key (a file format, docs/headless.md)",
    ),
}

#: names that say usd and should not, left for later: module -> (names, why they wait)
NOT_YET: dict[str, tuple[frozenset[str], str]] = {}


def says_usd(name: str) -> bool:
    """Whether a name has ``usd`` as one of its words (``cost_usd``, ``MAX_USD``,
    ``usd``), not inside a word (``StatusDocument``)."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower().split("_")
    return "usd" in words


def names_of(tree: ast.Module) -> dict[str, int]:
    """The names a module gives: functions and classes (nested ones too) and the functions'
    parameters, a class's fields and attributes, ``self.NAME = ...`` in its methods, and the
    module's own names; with the line of the first."""
    found: dict[str, int] = {}

    def add(name: str, line: int) -> None:
        found.setdefault(name, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            add(node.arg, node.lineno)

    def targets(node: ast.stmt) -> list[ast.expr]:
        if isinstance(node, ast.Assign):
            return list(node.targets)
        if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            return [node.target]
        return []

    def visit(body: list[ast.stmt], scope: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(node.name, node.lineno)
                visit(node.body, "class" if isinstance(node, ast.ClassDef) else "function")
                continue
            for target in targets(node):
                if isinstance(target, ast.Name) and scope in ("module", "class"):
                    add(target.id, node.lineno)
            for child in ast.walk(node):
                if (
                    isinstance(child, ast.Attribute)
                    and isinstance(child.ctx, ast.Store)
                    and isinstance(child.value, ast.Name)
                    and child.value.id == "self"
                ):
                    add(child.attr, child.lineno)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    visit(inner, scope)
            for handler in getattr(node, "handlers", []):
                visit(handler.body, scope)

    visit(tree.body, "module")
    return found


def usd_names(root: Path) -> dict[str, dict[str, int]]:
    """Every name saying usd under ``root``, by module (relative to ``root``)."""
    out: dict[str, dict[str, int]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        hits = {n: line for n, line in names_of(tree).items() if says_usd(n)}
        if hits:
            out[path.relative_to(root).as_posix()] = hits
    return out


def _listed(module: str, name: str, lists: dict[str, tuple[frozenset[str], str]]) -> bool:
    for place, (names, _why) in lists.items():
        here = module == place or (place.endswith("/") and module.startswith(place))
        if here and ("*" in names or name in names):
            return True
    return False


def unexplained(root: Path) -> list[str]:
    return [
        f"{module}:{line}: {name}"
        for module, hits in usd_names(root).items()
        for name, line in sorted(hits.items(), key=lambda item: item[1])
        if not _listed(module, name, TRUE_OR_SEEN) and not _listed(module, name, NOT_YET)
    ]


def test_no_name_of_the_package_says_usd_unless_it_is_listed_with_its_reason() -> None:
    found = unexplained(PACKAGE)
    assert not found, (
        "names that say usd for an amount in the session's currency (rename: *_micro, "
        "per_hour, to_units...; or list it above with why usd is true):\n  " + "\n  ".join(found)
    )


def test_every_listed_name_still_exists() -> None:
    # a stale entry would let a new name through: each listed name is still there
    present = usd_names(PACKAGE)
    stale = []
    for lists in (TRUE_OR_SEEN, NOT_YET):
        for place, (names, _why) in lists.items():
            if place.endswith("/") or "*" in names:
                assert any(m == place or m.startswith(place) for m in present), place
                continue
            stale += [f"{place}: {n}" for n in names if n not in present.get(place, {})]
    assert not stale, "listed but gone (remove from the list):\n  " + "\n  ".join(stale)


def test_the_check_sees_fields_attributes_functions_and_module_names(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "kernel").mkdir(parents=True)
    (package / "kernel" / "a.py").write_text(
        "from dataclasses import dataclass\n"
        "RATE_USD = 1\n"
        "@dataclass\n"
        "class Row:\n"
        "    usd_per_hour: int\n"
        "    status_document: str\n"
        "    def __init__(self) -> None:\n"
        "        if True:\n"
        "            self.total_usd = 0\n"
        "def to_units(micro_usd: int) -> int:\n"
        "    local_usd = micro_usd\n"
        "    return local_usd\n"
        "class StatusDocument:\n"
        "    pass\n"
    )
    assert usd_names(package) == {
        "kernel/a.py": {"RATE_USD": 2, "usd_per_hour": 5, "total_usd": 9, "micro_usd": 10}
    }
    assert says_usd("StatusDocument") is False
    assert says_usd("MicroUsdTotal") is True


def test_the_deprecated_names_read_what_the_new_ones_hold() -> None:
    from jupyter_gpucost.kernel.cell.measure import CellCost, OpCost
    from jupyter_gpucost.kernel.guard import Guard

    cell = CellCost(cost_micro=1_234_567, rate_per_hour=Decimal("6.862"))
    assert (cell.cost, cell.cost_usd) == (Decimal("1.234567"), Decimal("1.234567"))
    assert (cell.cost_micro_usd, cell.rate_usd_per_hour) == (1_234_567, Decimal("6.862"))
    op = OpCost(name="aten::mm", calls=3, self_time_s=0.5, share=0.5, cost_micro=617_284)
    assert op.cost_micro_usd == 617_284

    now = [0.0]
    with Guard(
        "0.5", 10, warmup_steps=2, usd_per_hour="2.75", display=False, clock=lambda: now[0]
    ) as g:
        for _ in range(3):
            now[0] += 10.0
            g.step()
    summary = g.summary()
    for figures in (g, summary):
        assert (figures.budget_usd, figures.usd_per_hour) == (Decimal("0.5"), Decimal("2.75"))
        assert figures.spent_usd == figures.spent == Decimal("0.022917")
        assert figures.usd_per_step == figures.per_step
        assert figures.projected_usd == figures.projected
        assert figures.usd_per_1k_tokens is figures.per_1k_tokens is None
