"""The package's import contracts: which process's code may import what, and no cycles.

Every ``import`` statement of every module counts, those inside functions (lazy imports)
included; only imports under ``if TYPE_CHECKING:`` are left out, since they never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = "jupyter_gpucost"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

#: third-party modules that belong to the Jupyter server process
WEB_SERVER = ("tornado", "jupyter_server", "jupyter_events")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_runtime(node: ast.AST) -> Iterator[ast.AST]:
    """Every node below ``node`` except the bodies of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from _walk_runtime(other)
            continue
        yield child
        yield from _walk_runtime(child)


def _imports(path: Path, modules: set[str], *, typing: bool = False) -> set[str]:
    """The absolute names a module imports: our modules resolved, others by their top name
    (with ``typing``, those under ``if TYPE_CHECKING:`` too)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree) if typing else _walk_runtime(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # `from . import x` imports the module x when there is one; the package's
            # own code counts only for the names that are not modules
            submodules = {f"{target}.{a.name}" for a in node.names} & modules
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(target)
    return found


def _graph(*, typing: bool = False) -> dict[str, set[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    paths = [p for p in paths if "labextension" not in p.relative_to(ROOT).parts]
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, modules, typing=typing) for p in paths}


GRAPH = _graph()
#: the same with the imports under ``if TYPE_CHECKING:``: a type is a dependency too
TYPED_GRAPH = _graph(typing=True)


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _offenders(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _in(module, layer)
        for target in targets
        if any(_in(target, f) for f in forbidden)
    )


def test_the_graph_sees_the_whole_package() -> None:
    # a broken parser would make every contract below pass vacuously
    assert "jupyter_gpucost.server.app" in GRAPH
    assert "jupyter_gpucost.kernel.magics" in GRAPH
    assert any(_in(t, "jupyter_gpucost.core") for t in GRAPH["jupyter_gpucost.server.service"])


def test_the_server_never_imports_the_kernel_side() -> None:
    assert _offenders(f"{PACKAGE}.server", (f"{PACKAGE}.kernel",)) == []


def test_the_kernel_side_never_imports_the_server_or_tornado() -> None:
    assert _offenders(f"{PACKAGE}.kernel", (f"{PACKAGE}.server", *WEB_SERVER)) == []


@pytest.mark.parametrize("layer", [f"{PACKAGE}.core", f"{PACKAGE}.telemetry", f"{PACKAGE}.cloud"])
def test_core_and_telemetry_import_neither_process_nor_tornado(layer: str) -> None:
    forbidden = (f"{PACKAGE}.server", f"{PACKAGE}.kernel", f"{PACKAGE}.hub", *WEB_SERVER)
    assert _offenders(layer, forbidden) == []


def test_the_hub_service_imports_neither_the_single_user_server_nor_the_kernel() -> None:
    # the hub service runs in its own process, beside the hub, and meets the single-user
    # servers only through the report protocol (core.hub_protocol)
    assert "jupyter_gpucost.hub.ledger" in GRAPH
    assert _offenders(f"{PACKAGE}.hub", (f"{PACKAGE}.server", f"{PACKAGE}.kernel")) == []


@pytest.mark.parametrize(
    "module", ["model", "allocation", "accounting", "budgets", "enforcer", "ledger"]
)
def test_the_hub_accounting_is_tornado_free(module: str) -> None:
    assert _offenders(f"{PACKAGE}.hub.{module}", WEB_SERVER) == []


def test_core_imports_nothing_of_the_package_above_it() -> None:
    # the meter prices readings whose shape lives in core.readings: no arrow runs up to
    # telemetry (or anywhere else) from the bottom layer
    core = [m for m in TYPED_GRAPH if _in(m, f"{PACKAGE}.core")]
    assert f"{PACKAGE}.core.meter" in core
    for module in core:
        ours = {t for t in TYPED_GRAPH[module] if _in(t, PACKAGE)}
        assert {t for t in ours if not _in(t, f"{PACKAGE}.core")} == set(), module


def _cycles(graph: dict[str, set[str]] | None = None) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), or self-imports."""
    graph = GRAPH if graph is None else graph
    edges = {m: {t for t in ts if t in graph and t != m} for m, ts in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_lazy_imports_included() -> None:
    assert _cycles() == []


@pytest.mark.parametrize("process", ["hub", "server", "kernel"])
def test_no_import_cycles_in_a_process_type_imports_included(process: str) -> None:
    # the hub's, the server's and the kernel's rooms are layered (below): not even a type
    # may point back up
    graph = {m: ts for m, ts in TYPED_GRAPH.items() if _in(m, f"{PACKAGE}.{process}")}
    assert graph
    assert _cycles(graph) == []


#: the hub's layers, lowest first: a module may import its own layer's and lower ones'
#: (the rooms' ``__init__`` say so in a line), never a higher one's, not even for a type
HUB_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "core",
        ("model", "activity", "accounting", "allocation", "budgets", "enforcer", "allowance"),
    ),
    ("ledger", ("ledger",)),
    ("profiles", ("profiles",)),
    ("cluster", ("cluster",)),
    ("idle", ("idle",)),
    ("reconcile", ("reconcile",)),
    ("service", ("service", "alerting")),
    ("web", ("web",)),
    (
        "app",
        (
            "app",
            "settings",
            "wiring",
            "runner",
            "check_command",
            "focus_export",
            "spawn_hook",
            "spawn_form",
            "__main__",
        ),
    ),
]


def _hub_layer(module: str) -> int | None:
    if module == f"{PACKAGE}.hub":
        return len(HUB_LAYERS) - 1
    for level, (_, names) in enumerate(HUB_LAYERS):
        if any(_in(module, f"{PACKAGE}.hub.{n}") for n in names):
            return level
    return None


def test_every_hub_module_is_in_a_room() -> None:
    homeless = [m for m in TYPED_GRAPH if _in(m, f"{PACKAGE}.hub") and _hub_layer(m) is None]
    assert homeless == []


def test_no_hub_module_imports_a_layer_above_its_own() -> None:
    upward = sorted(
        f"{module} ({HUB_LAYERS[low][0]}) imports {target} ({HUB_LAYERS[high][0]})"
        for module, targets in TYPED_GRAPH.items()
        if (low := _hub_layer(module)) is not None
        for target in targets
        if (high := _hub_layer(target)) is not None and high > low
    )
    assert upward == []


def test_the_layer_check_sees_an_upward_import() -> None:
    # the check above must be able to fail: the web is above the ledger
    assert _hub_layer(f"{PACKAGE}.hub.ledger.usage") == 1
    assert _hub_layer(f"{PACKAGE}.hub.web.views") == 7
    assert _hub_layer(f"{PACKAGE}.hub.app") == len(HUB_LAYERS) - 1
    # and the typed graph sees an import under `if TYPE_CHECKING:` the runtime one leaves out
    typed_only = {
        (m, t) for m, ts in TYPED_GRAPH.items() for t in ts if t not in GRAPH.get(m, set())
    }
    assert typed_only


@pytest.mark.parametrize(
    "room", ["ledger", "profiles", "cluster", "idle", "web", "allowance", "reconcile"]
)
def test_each_hub_room_says_what_it_owns_and_may_import(room: str) -> None:
    init = ROOT / "hub" / room / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert "May import:" in docstring


#: the single-user server's layers, lowest first, as for the hub. A room's ``handlers``
#: (its HTTP face) stands with the base handler in the web layer, above the service it reads
SERVER_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("inputs", "traits", "kernel_auth", "translations", "sampler")),
    ("ledger", ("ledger",)),
    ("gpu_use", ("gpu_use",)),
    ("record", ("record",)),
    (
        "service",
        ("service", "status", "status_ledger", "status_machine", "status_events", "hub_link"),
    ),
    ("export", ("export",)),
    ("budget", ("budget",)),
    ("notify", ("notify",)),
    ("machine", ("machine",)),
    ("spot", ("spot",)),
    ("agents", ("agents",)),
    (
        "web",
        (
            "web",
            "handlers",
            "routes",
            "gpu_use.handlers",
            "export.handlers",
            "budget.handlers",
            "notify.handlers",
            "agents.handlers",
        ),
    ),
    ("app", ("app", "startup", "settings")),
]
SERVER_ROOMS = [
    "ledger",
    "gpu_use",
    "record",
    "export",
    "budget",
    "notify",
    "machine",
    "spot",
    "agents",
]


def _server_layer(module: str) -> int | None:
    """The layer of the longest name of :data:`SERVER_LAYERS` that ``module`` is in."""
    if module == f"{PACKAGE}.server":
        return len(SERVER_LAYERS) - 1
    found: tuple[int, int] | None = None
    for level, (_, names) in enumerate(SERVER_LAYERS):
        for n in names:
            if _in(module, f"{PACKAGE}.server.{n}") and (found is None or len(n) > found[1]):
                found = (level, len(n))
    return None if found is None else found[0]


def test_every_server_module_is_in_a_room() -> None:
    server = [m for m in TYPED_GRAPH if _in(m, f"{PACKAGE}.server")]
    assert len(server) > len(SERVER_LAYERS)
    assert [m for m in server if _server_layer(m) is None] == []


def _server_upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} ({SERVER_LAYERS[low][0]}) imports {target} ({SERVER_LAYERS[high][0]})"
        for module, targets in graph.items()
        if (low := _server_layer(module)) is not None
        for target in targets
        if (high := _server_layer(target)) is not None and high > low
    )


def test_no_server_module_imports_a_layer_above_its_own() -> None:
    assert _server_upward(TYPED_GRAPH) == []


def test_the_server_layer_check_sees_an_upward_import() -> None:
    # the check above must be able to fail: the service is above what it records with,
    # and a room's handlers are above the service, the rest of the room below it
    def level(name: str) -> int | None:
        return _server_layer(f"{PACKAGE}.server.{name}")

    assert level("gpu_use.attribution") == 2
    assert level("record.recorder") == 3
    assert level("service") == 4
    assert level("gpu_use.handlers") == level("budget.handlers") == level("web") == 11
    assert level("agents.handlers") == level("web")
    assert level("agents.tools") == 10
    assert level("budget.controller") == 6
    assert level("app") == len(SERVER_LAYERS) - 1
    assert level("machine.setup") == 8
    assert level("spot.setup") == 9
    upward = {f"{PACKAGE}.server.record.recorder": {f"{PACKAGE}.server.budget.handlers"}}
    assert _server_upward(upward) == [
        f"{PACKAGE}.server.record.recorder (record) imports {PACKAGE}.server.budget.handlers (web)"
    ]


@pytest.mark.parametrize("room", SERVER_ROOMS)
def test_each_server_room_says_what_it_owns_and_may_import(room: str) -> None:
    init = ROOT / "server" / room / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert "May import:" in docstring


def test_every_server_room_is_layered() -> None:
    rooms = sorted(p.parent.name for p in (ROOT / "server").glob("*/__init__.py"))
    assert rooms == sorted(SERVER_ROOMS)


#: the kernel's layers, lowest first, as for the server. What users import stays at the top
#: of ``kernel/`` (the guard, its callbacks, the ticker, ``stop_when_done``), in the layer
#: of the tools built on a cell's measurement; the magics read a line and call them all
KERNEL_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("training", ("training",)),
    ("link", ("link",)),
    ("cell", ("cell",)),
    ("auto", ("auto",)),
    ("commands", ("commands",)),
    ("tools", ("guard", "guard_callbacks", "stop_when_done", "widgets", "gpu_identity")),
    ("magics", ("magics",)),
]
KERNEL_ROOMS = ["cell", "training", "commands"]


def _kernel_layer(module: str) -> int | None:
    if module == f"{PACKAGE}.kernel":
        return len(KERNEL_LAYERS) - 1
    for level, (_, names) in enumerate(KERNEL_LAYERS):
        if any(_in(module, f"{PACKAGE}.kernel.{n}") for n in names):
            return level
    return None


def _kernel_upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} ({KERNEL_LAYERS[low][0]}) imports {target} ({KERNEL_LAYERS[high][0]})"
        for module, targets in graph.items()
        if (low := _kernel_layer(module)) is not None
        for target in targets
        if (high := _kernel_layer(target)) is not None and high > low
    )


def test_every_kernel_module_is_in_a_room() -> None:
    kernel = [m for m in TYPED_GRAPH if _in(m, f"{PACKAGE}.kernel")]
    assert len(kernel) > len(KERNEL_LAYERS)
    assert [m for m in kernel if _kernel_layer(m) is None] == []


def test_no_kernel_module_imports_a_layer_above_its_own() -> None:
    assert _kernel_upward(TYPED_GRAPH) == []


def test_the_kernel_layer_check_sees_an_upward_import() -> None:
    # the check above must be able to fail: a cell's measurement is below auto mode and the
    # guard, which are below the magics
    def level(name: str) -> int | None:
        return _kernel_layer(f"{PACKAGE}.kernel.{name}")

    assert level("training.summary") == 0
    assert level("link") == 1
    assert level("cell.measure") == level("cell.cuda") == 2
    assert level("auto") == 3
    assert level("commands.fit") == 4
    assert level("guard") == level("guard_callbacks") == level("gpu_identity") == 5
    assert level("magics") == len(KERNEL_LAYERS) - 1
    assert _kernel_layer(f"{PACKAGE}.kernel") == len(KERNEL_LAYERS) - 1
    upward = {f"{PACKAGE}.kernel.cell.measure": {f"{PACKAGE}.kernel.auto"}}
    assert _kernel_upward(upward) == [
        f"{PACKAGE}.kernel.cell.measure (cell) imports {PACKAGE}.kernel.auto (auto)"
    ]


@pytest.mark.parametrize("room", KERNEL_ROOMS)
def test_each_kernel_room_says_what_it_owns_and_may_import(room: str) -> None:
    init = ROOT / "kernel" / room / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert "May import:" in docstring


def test_every_kernel_room_is_layered() -> None:
    rooms = sorted(p.parent.name for p in (ROOT / "kernel").glob("*/__init__.py"))
    assert rooms == sorted(KERNEL_ROOMS)


def test_the_cycle_finder_finds_a_cycle() -> None:
    # the check above must be able to fail: a two-module cycle is reported
    saved = dict(GRAPH)
    try:
        GRAPH["jupyter_gpucost.core.billing"] = {"jupyter_gpucost.core.money"}
        GRAPH["jupyter_gpucost.core.money"] = {"jupyter_gpucost.core.billing"}
        assert ["jupyter_gpucost.core.billing", "jupyter_gpucost.core.money"] in _cycles()
    finally:
        GRAPH.clear()
        GRAPH.update(saved)


def test_no_module_is_longer_than_500_lines() -> None:
    long = {
        _module_name(p): n
        for p in ROOT.rglob("*.py")
        if "labextension" not in p.relative_to(ROOT).parts
        and (n := len(p.read_text().splitlines())) > 500
    }
    assert long == {}


def test_what_users_type_keeps_working() -> None:
    # the public names in the docs: the guard (callable), the ticker, the callbacks, the magic
    import jupyter_gpucost
    from jupyter_gpucost import CostTicker, guard
    from jupyter_gpucost.guard import BudgetExceeded
    from jupyter_gpucost.guard_callbacks import LightningBudgetGuard  # noqa: F401
    from jupyter_gpucost.kernel import guard as kernel_guard
    from jupyter_gpucost.widgets import CostTicker as ticker

    assert guard is kernel_guard
    assert callable(guard)
    assert BudgetExceeded is kernel_guard.BudgetExceeded
    assert ticker is CostTicker
    assert callable(jupyter_gpucost.load_ipython_extension)


def test_the_kernel_paths_users_and_configs_name_keep_working() -> None:
    # the kernel's rooms moved modules behind these names; the names themselves stay:
    # docs/magic.md's request_stop, the callbacks' module (whose classes pickle by its
    # name), the ticker's, and the magics the headless collector imports in the kernel
    import jupyter_gpucost.guard_callbacks as callbacks
    import jupyter_gpucost.kernel.magics as magics
    import jupyter_gpucost.widgets as widgets
    from jupyter_gpucost.kernel import guard_callbacks as kernel_callbacks
    from jupyter_gpucost.kernel import widgets as kernel_widgets
    from jupyter_gpucost.kernel.stop_when_done import request_stop

    assert callbacks is kernel_callbacks
    assert callbacks.__name__ == "jupyter_gpucost.kernel.guard_callbacks"
    assert widgets is kernel_widgets
    assert callable(request_stop)
    assert callable(magics.load)
