"""The folders show the layers, and imports obey them (docs/style.md, principles 1 and 3).

``work/`` and ``auth/`` decide: they reach no edge (server, client, CLI), no driver and no
backend, and they never read the clock (only ``work/clock.py``, for the facade, resolves
``now=None``). ``storage/`` stores: it never reaches the authority. The edges translate:
the HTTP client reaches no storage, the worker runtime and the server no command line.

"Reach" is transitive: a module reaches what it imports, what those import, and so on
(importing ``a.b.c`` runs the packages ``a.b`` on the way). The root package ``feltdb``
is the public facade and re-exports everything, so its own imports are not followed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "feltdb"

EDGE_AND_DRIVERS = (
    "feltdb.server",
    "feltdb.client",
    "feltdb.cli",
    "feltdb.worker",
    "feltdb.testing",
    "fastapi",
    "httpx",
    "psycopg",
    "sqlite3",
    "typer",
    "rich",
)
BACKENDS = ("feltdb.storage.sqlite", "feltdb.storage.postgres")

CLOCK_CALLS = {
    "time.time",
    "time.time_ns",
    "datetime.now",
    "datetime.utcnow",
    "datetime.today",
    "datetime.datetime.now",
    "datetime.datetime.utcnow",
    "datetime.datetime.today",
    "date.today",
    "datetime.date.today",
}
CLOCK_IMPORTS = {("time", "time"), ("time", "time_ns")}
"""``from time import time`` hides the call as a bare ``time()``."""

CLOCK_ALLOWED = {SRC / "work" / "clock.py"}


def modules(package: str) -> list[Path]:
    found = sorted((SRC / package).rglob("*.py"))
    assert found, f"no modules under src/feltdb/{package}"
    return found


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (imports for the type
    checker only: they never run, so they reach nothing).
    """
    found: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        found.append(node)
        if isinstance(node, ast.If) and dotted(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return found


def imported_names(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module ``source`` imports at run time, relative imports resolved against
    ``module``, and each ``from x import y`` also as ``x.y`` (y may be a submodule).
    """
    names: set[str] = set()
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def violations(names: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        name for name in names for bad in forbidden if name == bad or name.startswith(bad + ".")
    )


def dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner is not None else None
    return None


def clock_reads(source: str) -> list[str]:
    """Calls in ``source`` that read the wall clock."""
    tree = ast.parse(source)
    hidden = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if (node.module, alias.name) in CLOCK_IMPORTS
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name in CLOCK_CALLS or name in hidden:
                found.append(f"line {node.lineno}: {name}()")
    return found


def relative(path: Path) -> str:
    return str(path.relative_to(SRC.parent.parent))


# ------------------------------------------------------------------ the checker itself


def test_the_checker_sees_plain_from_and_relative_imports():
    source = (
        "import sqlite3\n"
        "from feltdb.server import app\n"
        "from feltdb import client\n"
        "from ..storage import sqlite\n"
        "from . import lifecycle\n"
    )
    names = imported_names(source, "feltdb.work.store")
    assert violations(names, EDGE_AND_DRIVERS) == [
        "feltdb.client",
        "feltdb.server",
        "feltdb.server.app",
        "sqlite3",
    ]
    assert violations(names, BACKENDS) == ["feltdb.storage.sqlite"]
    assert "feltdb.work.lifecycle" in names


def test_the_checker_leaves_out_imports_for_the_type_checker_only():
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import httpx\nelse:\n    import sqlite3\n"
    )
    names = imported_names(source, "feltdb.auth.policy")
    assert violations(names, EDGE_AND_DRIVERS) == ["sqlite3"]


def test_the_checker_does_not_confuse_a_prefix_with_a_package():
    assert violations({"richtext", "feltdb.clientele"}, EDGE_AND_DRIVERS) == []


def test_the_checker_sees_clock_reads_however_spelled():
    source = (
        "import time\nimport datetime\nfrom datetime import datetime as dt\n"
        "from time import time as now\n"
        "a = time.time()\nb = datetime.datetime.now()\nc = now()\n"
        "d = time.monotonic()\n"
    )
    assert clock_reads(source) == [
        "line 5: time.time()",
        "line 6: datetime.datetime.now()",
        "line 7: now()",
    ]


# ------------------------------------------------------------------ the rules


@pytest.mark.parametrize("path", modules("work") + modules("auth"), ids=relative)
def test_the_domain_imports_no_edge_and_no_driver(path):
    names = imported_names(
        path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py"
    )
    assert violations(names, EDGE_AND_DRIVERS) == []


@pytest.mark.parametrize("path", modules("work"), ids=relative)
def test_the_authority_reaches_storage_only_through_the_protocol(path):
    names = imported_names(
        path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py"
    )
    assert violations(names, BACKENDS) == []


@pytest.mark.parametrize("path", modules("storage"), ids=relative)
def test_storage_never_imports_the_authority(path):
    names = imported_names(
        path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py"
    )
    assert violations(names, ("feltdb.work",)) == []


@pytest.mark.parametrize(
    "path",
    [p for p in modules("work") + modules("auth") if p not in CLOCK_ALLOWED],
    ids=relative,
)
def test_time_is_an_argument_in_the_domain(path):
    assert clock_reads(path.read_text(encoding="utf-8")) == []


def test_one_module_reads_the_clock_and_the_facade_resolves_now_with_it():
    assert clock_reads((SRC / "work" / "clock.py").read_text(encoding="utf-8")) != []
    facade = (SRC / "work" / "store.py").read_text(encoding="utf-8")
    assert "from feltdb.work.clock import resolved_now" in facade


# ------------------------------------------------------------------ what each layer may reach

EDGES = (
    "feltdb.server",
    "feltdb.client",
    "feltdb.cli",
    "feltdb.worker",
    "feltdb.testing",
    "feltdb.demo",
    "fastapi",
    "starlette",
    "uvicorn",
    "httpx",
    "typer",
    "rich",
    "prometheus_client",
)
DRIVERS = ("psycopg", "psycopg_pool", "sqlite3")

NEVER_REACHES: dict[str, tuple[str, ...]] = {
    "feltdb.auth": (*EDGES, *DRIVERS, "feltdb.work", *BACKENDS),
    "feltdb.work": EDGES,
    "feltdb.storage": (*EDGES, "feltdb.work", "feltdb.auth"),
    # The HTTP client may hold the storage's records (a CommittedTransaction) but never
    # open a store.
    "feltdb.client.http": (*DRIVERS, *BACKENDS, "feltdb.storage.engine", "feltdb.work.store",
                           "feltdb.server", "feltdb.cli", "feltdb.worker", "fastapi", "typer",
                           "rich"),
    "feltdb.client.http_async": (*DRIVERS, *BACKENDS, "feltdb.storage.engine",
                                 "feltdb.work.store", "feltdb.server", "feltdb.cli",
                                 "feltdb.worker", "fastapi", "typer", "rich"),
    "feltdb.worker": ("feltdb.server", "feltdb.cli", "fastapi", "uvicorn", "typer", "rich"),
    "feltdb.server": ("feltdb.cli", "feltdb.worker", "feltdb.client", "typer", "rich"),
}  # fmt: skip
"""Per layer (a package, or one module), what none of its modules may reach."""

BELOW_THE_FACADE = [
    module_name(path) for path in modules("work") if path.name not in ("store.py", "__init__.py")
]
"""The authority's modules but the facade: they reach storage only through the protocol."""


def import_graph() -> dict[str, set[str]]:
    """Each module of ``src/feltdb`` and the modules (or external names) it imports."""
    known = {module_name(path): path for path in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        found: set[str] = set()
        names = imported_names(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        for imported in names:
            if imported in known:
                found.add(imported)
            elif imported.rsplit(".", 1)[0] not in known:
                found.add(imported.split(".")[0])  # an external package
        # Importing a.b.c runs the packages on the way (but the root facade, see above).
        for target in list(found):
            parts = target.split(".")
            found.update(
                ".".join(parts[:n]) for n in range(2, len(parts)) if ".".join(parts[:n]) in known
            )
        graph[name] = {target for target in found if target != "feltdb"}
    return graph


GRAPH = import_graph()


def reach(module: str) -> set[str]:
    """Every module ``module`` reaches, transitively."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for target in GRAPH.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def in_layer(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def test_the_graph_sees_transitive_reach():
    assert "feltdb.storage.base" in reach("feltdb.work.store")
    assert "feltdb.work.models" in reach("feltdb.work.store")
    assert "feltdb.auth.grants" in reach("feltdb.work.store"), "through feltdb.work.models"


@pytest.mark.parametrize("layer", sorted(NEVER_REACHES))
def test_each_layer_reaches_only_what_it_may(layer):
    found = {
        module: violations(reach(module), NEVER_REACHES[layer])
        for module in GRAPH
        if in_layer(module, layer)
    }
    assert any(in_layer(module, layer) for module in GRAPH), f"no modules in {layer}"
    assert {module: bad for module, bad in found.items() if bad} == {}


@pytest.mark.parametrize("module", BELOW_THE_FACADE)
def test_below_the_facade_the_authority_reaches_no_backend(module):
    assert violations(reach(module), (*BACKENDS, *DRIVERS)) == []


@pytest.mark.parametrize(
    "path",
    [p for p in modules("work") + modules("auth") if p.name not in ("store.py", "clock.py")],
    ids=relative,
)
def test_only_the_facade_asks_the_clock_module(path):
    assert "feltdb.work.clock" not in path.read_text(encoding="utf-8")


AUTHORIZING = ("authorize", "claim_filter")
"""What decides whether a caller may: the policy's rules (its ``allows*`` answer only what
a page offers to show, and decide nothing)."""


@pytest.mark.parametrize(
    "path", modules("server") + modules("client") + modules("cli"), ids=relative
)
def test_the_edges_decide_no_capability_and_act_through_one_authority_per_caller(path):
    """A route, a dashboard form and the local client build their caller's
    :class:`~feltdb.work.authority.Authority` and call it: none applies a capability rule
    of its own, so none can apply one differently or forget one."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    applied = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "feltdb.auth.policy"
        for alias in node.names
        if alias.name.startswith(AUTHORIZING)
    ]
    assert applied == []
